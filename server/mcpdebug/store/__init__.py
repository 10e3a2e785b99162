"""The embedded store of a `.mcpdebug/` folder: SQLite tables (runs, tests, phases, failures, hangs,
holds), each test's output in a file of its own, and retention. Only the server and the CLI write it.

- `database`: opening the store, the one writer (`Store.apply`) and retention
- `schema`: the tables and migrations; `events`: how each event changes them; `queries`: every read
- `output_files`: captured output, one file per test, indexed by segments
- `output_query`: line ranges, regex search and time windows over stored output
"""

from mcpdebug.names import StoreError
from mcpdebug.store.database import Store
from mcpdebug.store.queries import FINAL_OUTCOMES, PHASE_ORDER, PROBLEM_OUTCOMES
from mcpdebug.store.schema import SCHEMA_VERSION

__all__ = ["FINAL_OUTCOMES", "PHASE_ORDER", "PROBLEM_OUTCOMES", "SCHEMA_VERSION", "Store", "StoreError"]
