"""One leanrpc server per Ray node, started as Ray actors.

`deploy_per_node(config)` places a `LeanrpcNodeServer` actor on every alive
node (hard node affinity), each runs `create_server(config)` on its node
(stand-in REPL unless the config names a real one) and reports the address
it serves on. `RayDeployment.verifier()` gives a `RayVerifier` over those
addresses, routing by import header so each header stays warm on one node.

Ray is imported only inside these functions: `import leanrpc.ray` works
without it, so the routing half stays usable anywhere.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import os
import time
from typing import Iterable

from ..config import Config
from .verifier import RayVerifier

log = logging.getLogger("leanrpc.ray")

# Wildcard binds are advertised under the node's IP instead.
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


class LeanrpcNodeServer:
    """One node's server; `node_server_actor()` is this class as a Ray actor.

    All methods are async, so Ray runs the actor on one event loop, which the
    gRPC server and the pool keep using between calls.
    """

    def __init__(self, config: Config) -> None:
        self._config = config
        self._app = None
        # Async actor methods interleave: a stop() sent while start() is
        # still spawning workers must wait for it, or they would be orphaned.
        self._lifecycle = asyncio.Lock()

    async def start(self, host: str | None) -> dict:
        """Starts the server on this node; returns what `NodeServer` holds."""
        import ray

        from ..app import create_server

        node_ip = ray.util.get_node_ip_address()
        config = copy.deepcopy(self._config)
        config.server.host = host if host is not None else node_ip
        async with self._lifecycle:
            app = self._app = await create_server(config)
        advertised = node_ip if config.server.host in _WILDCARD_HOSTS else config.server.host
        identity = app.pool.identity
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "address": f"{advertised}:{app.port}",
            "pid": os.getpid(),
            "verifier_kind": identity.kind if identity else "",
        }

    async def stats(self) -> dict:
        """Pool counters, and the pids of this actor's REPL workers."""
        if self._app is None:
            raise RuntimeError("this leanrpc node server is not running")
        published = self._app.pool.metrics(memory=False)
        stats = published.stats
        return {
            "jobs_finished": stats.jobs_finished,
            "header_loads": stats.header_loads,
            "header_hits": stats.header_hits,
            "worker_pids": [w.pid for w in published.workers if w.pid],
        }

    async def stop(self, grace: float) -> None:
        # Graded shutdown of the gRPC server and every REPL worker, before
        # the actor process itself goes (its workers run in own sessions and
        # would otherwise outlive it).
        async with self._lifecycle:
            if self._app is not None:
                app, self._app = self._app, None
                await app.stop(grace)


_remote_class = None


def node_server_actor():
    """The `LeanrpcNodeServer` Ray actor class (built on first use)."""
    global _remote_class
    if _remote_class is None:
        import ray

        _remote_class = ray.remote(LeanrpcNodeServer)
    return _remote_class


@dataclasses.dataclass
class NodeServer:
    """One deployed server: where it runs and how to reach it."""

    node_id: str
    address: str
    pid: int
    verifier_kind: str
    actor: object  # ray.actor.ActorHandle


@dataclasses.dataclass
class RayDeployment:
    """The per-node servers of one `deploy_per_node` call; owns their actors."""

    servers: list[NodeServer]
    token: str | None = None

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.servers]

    def verifier(self, **client_kwargs) -> RayVerifier:
        """A blocking, picklable verifier over these servers (header affinity).

        Args:
            client_kwargs: passed to each `AsyncClient` (max_retries, backoff_s...).
        """
        return RayVerifier(self.addresses, token=self.token, **client_kwargs)

    def stats(self, timeout_s: float = 60.0) -> dict[str, dict]:
        """address -> the pool counters of that node's server."""
        import ray

        values = ray.get([s.actor.stats.remote() for s in self.servers], timeout=timeout_s)
        return {s.address: v for s, v in zip(self.servers, values)}

    def shutdown(self, grace: float = 10.0, timeout_s: float = 60.0) -> None:
        """Stops every server (graded worker shutdown), then ends the actors."""
        _stop_actors([s.actor for s in self.servers], grace, timeout_s)
        self.servers = []

    def __enter__(self) -> "RayDeployment":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def _stop_actors(actors: list, grace: float, timeout_s: float) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    pending = [a.stop.remote(grace) for a in actors]
    # One at a time: ray.get on the list would give up at the first failed
    # actor (say, one that never got placed) and kill the others mid-stop.
    for actor, ref in zip(actors, pending):
        try:
            ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
        except Exception as exc:  # killed below all the same
            log.warning("leanrpc node server did not stop cleanly: %s", exc)
        ray.kill(actor, no_restart=True)


def alive_node_ids() -> list[str]:
    import ray

    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")]


def deploy_per_node(
    config: Config | None = None,
    *,
    node_ids: Iterable[str] | None = None,
    host: str | None = None,
    num_cpus: float = 1,
    token: str | None = None,
    timeout_s: float = 300.0,
) -> RayDeployment:
    """Starts one leanrpc server on each alive Ray node (or on `node_ids`).

    Args:
        config: server config for every node; default `Config()` (stand-in
            REPL, one worker per core of the node). `server.port` 0 picks a
            free port per node.
        node_ids: Ray node ids to use; default every alive node.
        host: address each server binds; default the node's IP as Ray sees
            it. Off loopback the config must carry auth tokens (or mTLS).
        num_cpus: Ray CPUs each actor reserves. Its REPL workers
            (`config.pool.workers`) are outside Ray's accounting: reserve as
            many as they use when trainers share the nodes.
        token: bearer token the verifier sends; default the config's first
            inline `server.auth_tokens` entry, if any.
        timeout_s: how long to wait for all servers to start.

    Returns:
        A `RayDeployment`; call `shutdown()` (or use it as a context manager).
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if not ray.is_initialized():
        raise RuntimeError("ray is not initialized: call ray.init() (or use leanrpc.ray.connect)")
    config = config or Config()
    nodes = list(node_ids) if node_ids is not None else alive_node_ids()
    if not nodes:
        raise RuntimeError("no alive Ray nodes to deploy leanrpc on")
    actor_class = node_server_actor()
    actors = [
        actor_class.options(
            num_cpus=num_cpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
        ).remote(config)
        for node in nodes
    ]
    try:
        infos = ray.get([a.start.remote(host) for a in actors], timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        _stop_actors(actors, 2.0, 30.0)
        raise TimeoutError(
            f"leanrpc servers did not start on {len(nodes)} node(s) within {timeout_s}s; "
            f"does every node have {num_cpus} free Ray CPU(s)?"
        ) from None
    except BaseException:
        _stop_actors(actors, 2.0, 30.0)
        raise
    servers = [NodeServer(actor=a, **info) for a, info in zip(actors, infos)]
    if token is None and config.server.auth_tokens:
        token = config.server.auth_tokens[0]
    for server in servers:
        log.info(
            "leanrpc on Ray node %s: %s (%s)",
            server.node_id[:12],
            server.address,
            server.verifier_kind,
        )
    return RayDeployment(servers=servers, token=token)


def connect(
    config: Config | None = None,
    *,
    ray_address: str | None = None,
    client_kwargs: dict | None = None,
    **deploy_kwargs,
) -> RayVerifier:
    """Deploys one server per Ray node and returns a verifier over them.

    For trainer code: `verifier = leanrpc.ray.connect(config)`, then
    `verifier.verify(snippets)`; `verifier.close()` also shuts the servers
    down. Copies of the verifier sent to Ray tasks only close their channels.

    Args:
        config: as for `deploy_per_node`.
        ray_address: passed to `ray.init` when Ray is not initialized yet.
        client_kwargs: passed to each `AsyncClient`.
        deploy_kwargs: the other `deploy_per_node` arguments.
    """
    import ray

    if not ray.is_initialized():
        ray.init(address=ray_address)
    deployment = deploy_per_node(config, **deploy_kwargs)
    verifier = deployment.verifier(**(client_kwargs or {}))
    verifier.deployment = deployment
    return verifier
