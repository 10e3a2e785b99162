"""Seeing what happened: seed 000's structured server log, the terminal UI, the HTML report.

`server_log` writes the log (off the event loop), `entries` says what goes in it, `log_values`
bounds and cleans every value first; `log_reader` parses it back (`log_text` words its entries) and
`run_watch` reads the store's runs for `tui` (textual, imported only by `mcpdebug tui`: `tui_runs`
and `tui_log` are its two views); `html` renders a recorded run as one self-contained file (jinja2,
imported only by `mcpdebug report --html`).
"""
