"""Pure analyses behind the diagnosis tools (no store, no I/O): easy to test by their properties.

- `localization`: the suspects' ranking every reader shares (get_suspects, get_failure, the brief in
  pytest's output): coverage plus the failing stacks, statement kinds, traced values and the dynamic
  localizer's verdicts, each suspect with why (`rank_lines`)
- `statements`: each line's kind, what it calls, which blocks a branch decides
- `ranking`: spectrum-based fault localisation (Ochiai, DStar) with ties made explicit
- `functions`: which function each line of a source file belongs to (function-level ranking)
- `flaky`: a failure against the test's history (new, known flaky, failing since)
- `values`: how a traced test's values got their state (assignments, returns, the failing line)
"""
