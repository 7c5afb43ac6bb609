"""Tensor data: sizes read from protos, chunked memory-mapped reads and casts, range facts against the LOW type."""
