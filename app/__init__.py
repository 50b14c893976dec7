"""Ember application layer: CLI, config, history, server."""
