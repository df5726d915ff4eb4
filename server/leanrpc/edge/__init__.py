"""leanrpc.edge: the gRPC boundary; protobuf at the door, internal types inside.

Owns: the servicers (`verifier`, `formalizer`, `prover`, `stream` for
VerifyStream's flow control), protobuf <-> internal conversion (`convert`),
the one table from errors to status codes (`errors`), the access policy
(`auth`), the call interceptors (`interceptors/`), reflection and the
Prometheus exporter (`metrics`, its scrape-time `collectors`). Only this room and the client import the
generated `*_pb2` stubs; the edge asks services for `admission()` and
`info()` and never touches the pool.
May import: leanrpc.services, leanrpc.config, leanrpc.errors,
leanrpc.results, leanrpc.formalize (its types), leanrpc.v1.
"""
