"""Layer 3: the persistent structures (commitlog, consume queues, index files, checkpoint, JSON state)."""
