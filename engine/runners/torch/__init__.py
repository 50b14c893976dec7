"""Our transformer on PyTorch."""
