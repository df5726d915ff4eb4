"""leanrpc.ops."""
