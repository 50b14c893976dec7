"""The open chat without widgets: its session (history, requests, replies), tool turns, and what
it sends the engine."""
