"""The MCP tools, in groups (one module per concern), and the prompts that guide an agent through them.

- `runs`: recorded runs and their tests (list_sessions, get_run_summary, list_tests, get_test)
- `failures`: a failure's snapshot and its frames, stored or live (get_failure, get_stack_trace, ...)
- `hangs`: why a test hung, and running something under the hang watchdog (get_hang, detect_hang)
- `live`: running tests and driving a held test (run_tests, wait_for_stop, evaluate_expression, ...)
- `output`: stored output (get_output, search_output, get_logs, and the output resources)
- `guide`: the prompts (investigate_failure, diagnose_hang, triage_run) and argument completion

`args` describes every argument once; `context` holds what the groups share (the store, the live
sessions, the test runner, the ``@tool`` marker and the error wrappers); `server` is the MCP server
class that turns replies into both content forms and bad arguments into errors an agent can act on.
"""
