"""Native CPU kernels for the torch runner: GGUF blocks multiplied in place, the decode step in
one call (C sources in csrc/, built with the system compiler on first use)."""
