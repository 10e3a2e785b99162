"""Per-test line coverage (``--mcp-debug-coverage``): imported only when it is asked for.

`collector` measures the project's own code with coverage.py, one context per test, into a data
file under ``.mcpdebug/coverage/``; the server ranks suspect lines from it (`get_suspects`).
"""
