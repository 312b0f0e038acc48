"""Layer 2: bytes at positions in files; knows nothing about messages."""
