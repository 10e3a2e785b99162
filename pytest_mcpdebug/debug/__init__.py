"""debugpy inside a debugged process: the launcher of scripts and the start-up of a debug test run.

Loaded only when the server asks for a debug session; nothing here is imported by a plain run.
"""
