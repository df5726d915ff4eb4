"""leanrpc.edge.interceptors: what runs around every gRPC call, whatever the method.

Owns the cross-cutting call handling (STYLE.md lesson 10): `metrics` (counts
calls, codes and snippet results), `auth` (bearer tokens, per-client
concurrency), `lenient` (a request that does not parse gets INVALID_ARGUMENT
with the parser's reason). `wrap` is the one helper that puts code around a
handler's behavior, so every interceptor wraps unary and streaming calls the
same way.

Error mapping is not an interceptor here: servicer methods end a failed call
through `edge.errors` (`maps_errors`, `abort_with`, the one status table), so
the code is final before any interceptor reads it.

May import: grpc, protobuf descriptors (never the generated stubs),
leanrpc.config, leanrpc.errors, leanrpc.edge.errors, leanrpc.edge.auth.
"""
