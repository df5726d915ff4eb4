"""leanrpc.services."""
