"""The MCP tools and resources, one module per concern; each has ``register(server, context)``.

- `runs`: recorded runs and their tests (list_sessions, get_run_summary, list_tests, get_test)
- `failures`: a failure's snapshot and its frames, stored or live (get_failure, get_stack_trace, ...)
- `hangs`: why a test hung, and running something under the hang watchdog (get_hang, detect_hang)
- `live`: running tests and driving a held test (run_tests, wait_for_stop, evaluate_expression, ...)
- `output`: stored output (get_output, search_output, get_logs, and the output resources)

`context` holds what they share: the store, the live sessions, the test runner, and the wrappers
that turn lookup failures into error results an agent can act on.
"""
