"""The models screen's catalog: local models, Hub search and downloads behind one protocol."""
