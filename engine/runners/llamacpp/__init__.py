"""llamacpp."""
