"""Processes the server starts and manages: test runs (`run_tests`, `wait_for_stop`) and hang
detection runs (`detect_hang`)."""
