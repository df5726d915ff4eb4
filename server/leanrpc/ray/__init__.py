"""Scale-out over Ray: one leanrpc server per node, routing by header affinity.

`HeaderRing` maps a header hash (`leanrpc.client.header_hash`) to one of N
leanrpc servers by consistent hashing with bounded loads; `ShardedClient`
splits a batch by header across the servers, verifies the shards concurrently
and returns the results in input order. A header stays on its owner, whose
pool holds it warm, while that server is under (1 + epsilon) x the mean load;
the overflow goes to the next server on the ring (always the same one for the
header), so one dominant header spreads over the cluster instead of pinning
one machine. Adding or removing a server remaps about 1/N of the headers.
`RayVerifier` is its blocking, picklable wrapper for trainer code.

`deploy_per_node(config)` starts a `LeanrpcNodeServer` Ray actor on every
alive node; `connect(config)` does that and returns a `RayVerifier`:

    import leanrpc.ray
    verifier = leanrpc.ray.connect()      # ray.init() first, or it calls it
    results = verifier.verify(snippets)   # header affinity across the nodes
    verifier.close()                      # also stops the servers

Ray is optional (`pip install 'leanrpc[ray]'`) and imported lazily: the
routing works without it.

Owns: running one leanrpc server per Ray node and routing batches across them.
May import: leanrpc.app, leanrpc.client, leanrpc.config (and ray, lazily).
"""

from .deploy import NodeServer, RayDeployment, connect, deploy_per_node
from .routing import HeaderRing, ShardedClient
from .verifier import RayVerifier

__all__ = [
    "HeaderRing",
    "ShardedClient",
    "RayVerifier",
    "RayDeployment",
    "NodeServer",
    "deploy_per_node",
    "connect",
    "LeanrpcNodeServer",
]


def __getattr__(name: str):
    # The actor class needs ray; build it only when asked for.
    if name == "LeanrpcNodeServer":
        from .deploy import node_server_actor

        return node_server_actor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
