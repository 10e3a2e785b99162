"""Text views of stored and live data, shared by the MCP tools and the CLI: each module renders one
concern (runs, failures, frames, hangs, output, live stops); `lookup` resolves the ids a caller gave."""
