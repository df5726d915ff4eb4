"""leanrpc.pool."""
