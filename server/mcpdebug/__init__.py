"""mcpdebug: the companion MCP server and CLI of pytest-mcpdebug."""
