"""Layer 1: pure codecs of RocketMQ's on-disk layouts. Bytes in, values out; no files, clocks or threads."""
