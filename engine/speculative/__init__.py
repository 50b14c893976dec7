"""speculative."""
