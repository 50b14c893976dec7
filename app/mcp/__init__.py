"""MCP (Model Context Protocol) servers as tools for the chat: config.py reads them from the
settings, hub.py connects (stdio or streamable HTTP) and calls them."""
