"""Ingest: where events enter the store. Live test processes stream them over the WebSocket
(`websocket`); runs recorded without a server left spool files (`spool`); processes that died left hang
dumps (`hang_dumps`). All go through `Store.apply`, which stores each event once."""
