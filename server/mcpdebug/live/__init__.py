"""Live sessions: tests held alive right now (at a failure or a hang) and how to reach the process
holding each, over its ingest connection."""
