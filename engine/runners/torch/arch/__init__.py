"""arch."""
