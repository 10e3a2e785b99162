"""Seeing what happened: seed 000's structured server log, the terminal UI over it, the HTML report.

`server_log` writes the log (off the event loop), `entries` says what goes in it, `log_values`
bounds and cleans every value first; `log_reader` parses it back for `tui` (textual, imported only by
`mcpdebug tui`); `html` renders a recorded run as one self-contained file (jinja2, imported only by
`mcpdebug report --html`).
"""
