"""Ember engine: scheduling, KV bookkeeping, sampling, runners. Imports no Textual."""
