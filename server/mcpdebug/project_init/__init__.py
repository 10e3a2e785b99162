"""`mcpdebug init`: what makes a project ready for agents, planned as changes, shown, then written.

`command` runs it; `environment` finds what the server needs to run the project's tests (which
`mcpdebug`, which PYTHONPATH); `pytest_config`, `clients` and `agents_md` each plan the change of
one kind of file; `changes` shows and writes them.
"""
