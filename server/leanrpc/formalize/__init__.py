"""leanrpc.formalize."""
