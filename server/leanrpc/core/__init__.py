"""leanrpc.core."""
