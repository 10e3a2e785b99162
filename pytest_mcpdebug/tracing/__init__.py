"""Value traces (``--mcp-debug-trace``, the server's `trace_test`): imported only when asked for.

`recorder` turns the events of the running code into bounded steps (a local changed, a function was
called or returned, an exception went through); `backends` feeds it from sys.monitoring (3.12+) or
sys.settrace (3.10-3.11); `plugin` traces each test of the run and sends its trace.
"""
