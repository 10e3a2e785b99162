"""pytest-mcpdebug: record pytest runs for investigation by an AI agent over MCP."""

__version__ = "0.1.0"
