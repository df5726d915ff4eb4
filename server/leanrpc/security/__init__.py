"""leanrpc.security."""
