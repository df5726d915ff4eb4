"""leanrpc.worker."""
