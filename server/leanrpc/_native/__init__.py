"""leanrpc._native."""
