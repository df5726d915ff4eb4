"""leanrpc.extract."""
