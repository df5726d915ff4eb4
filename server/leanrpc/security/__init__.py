"""Worker sandboxing (see docs/SECURITY.md); access control lives in leanrpc.edge.auth."""
