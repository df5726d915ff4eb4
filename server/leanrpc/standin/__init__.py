"""leanrpc.standin."""
