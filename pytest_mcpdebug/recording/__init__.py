"""Recording a run: the recorder of each process, pytest hooks turned into events, and their delivery
(WebSocket to the server, or the spool file when there is none)."""
