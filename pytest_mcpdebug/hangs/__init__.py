"""Hangs: per-test timeouts, the watchdog that samples a timed test, how a hang is classified and
reported, the GIL backstop and its dump, and the reaper that prints it."""
