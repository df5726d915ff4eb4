"""leanrpc.edge."""
