"""Runners turn scheduled token batches into logits: torch, llama.cpp, remote."""
