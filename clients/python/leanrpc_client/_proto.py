"""The generated gRPC stubs the client speaks.

Owns: finding them. The client's own distribution (clients/python) ships
them as `leanrpc_client._v1`; inside the server's install (where this
package is mapped to `leanrpc.client`) they are the server's `leanrpc.v1`.
"""

from __future__ import annotations

if __package__ == "leanrpc.client":  # mapped into the server's install
    from leanrpc.v1 import formalizer_pb2 as fpb
    from leanrpc.v1 import formalizer_pb2_grpc as fpb_grpc
    from leanrpc.v1 import prover_pb2 as ppb
    from leanrpc.v1 import prover_pb2_grpc as ppb_grpc
    from leanrpc.v1 import verifier_pb2 as pb
    from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
else:  # the leanrpc-client distribution
    from ._v1 import formalizer_pb2 as fpb
    from ._v1 import formalizer_pb2_grpc as fpb_grpc
    from ._v1 import prover_pb2 as ppb
    from ._v1 import prover_pb2_grpc as ppb_grpc
    from ._v1 import verifier_pb2 as pb
    from ._v1 import verifier_pb2_grpc as pb_grpc

__all__ = ["fpb", "fpb_grpc", "pb", "pb_grpc", "ppb", "ppb_grpc"]
