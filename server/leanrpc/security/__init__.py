"""leanrpc.security: worker sandboxing (see docs/SECURITY.md).

Owns: the launch policy (`sandbox`), the in-child jail it runs (`enter`:
namespaces, rlimits; stdlib only), the `seccomp` filters and per-worker
`cgroups`. Access control (tokens, per-client limits) is the edge's:
leanrpc.edge.auth and leanrpc.edge.interceptors.auth.
May import: leanrpc.config, leanrpc.worker (the Launcher seam).
"""
