"""Scale-out routing by header affinity, for trainers that run many replicas.

`HeaderRing` maps a header hash (`leanrpc.client.header_hash`) to one of N
leanrpc servers on a consistent-hash ring; `ShardedClient` splits a batch by
header across the servers, verifies the shards concurrently and returns the
results in input order. One header always reaches the same server, whose pool
holds it warm; adding or removing a server remaps about 1/N of the headers.

This is the routing half of the Ray adapter: give it the addresses of the
per-node servers (e.g. one `leanrpc serve` per Ray node). Starting those
servers as Ray actors is not part of this package yet.
"""

from .routing import HeaderRing, ShardedClient

__all__ = ["HeaderRing", "ShardedClient"]
