"""The chat screen and the screens it opens."""
