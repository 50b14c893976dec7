"""quants."""
