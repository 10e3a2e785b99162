"""Pure analyses behind the diagnosis tools (no store, no I/O): easy to test by their properties.

- `ranking`: spectrum-based fault localisation (Ochiai, DStar) with ties made explicit
- `functions`: which function each line of a source file belongs to (function-level ranking)
- `flaky`: a failure against the test's history (new, known flaky, failing since)
- `values`: how a traced test's values got their state (assignments, returns, the failing line)
"""
