"""leanrpc.client: Python client for the leanrpc Verifier service."""
