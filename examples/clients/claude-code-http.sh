#!/bin/sh
# Claude Code talking to `mcpdebug serve --http` (streamable HTTP, bearer token on every request).
# Fix the token so this configuration outlives a restart of the server:
#   export MCPDEBUG_HTTP_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')
#   mcpdebug serve --http --port 8765
# (Without MCPDEBUG_HTTP_TOKEN the server makes a new token at each start, prints this very command
# with it, and keeps it in .mcpdebug/server.json as mcp_token.)
claude mcp add --transport http mcpdebug http://127.0.0.1:8765/mcp \
    --header "Authorization: Bearer ${MCPDEBUG_HTTP_TOKEN:?set MCPDEBUG_HTTP_TOKEN to the server token}"
