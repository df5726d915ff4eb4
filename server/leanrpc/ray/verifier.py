"""A blocking, picklable verifier over several leanrpc servers (no Ray needed)."""

from __future__ import annotations

import asyncio
import threading
from typing import Iterable

from ..client import Result
from .routing import HeaderRing, ShardedClient


def _as_pairs(snippets: Iterable) -> list[tuple[str, str]]:
    """str, (id, code) or {"id", "code"} -> (id, code); ids default to the index."""
    pairs = []
    for index, item in enumerate(snippets):
        if isinstance(item, str):
            pairs.append((str(index), item))
        elif isinstance(item, dict):
            pairs.append((str(item.get("id", index)), item["code"]))
        else:
            snippet_id, code = item
            pairs.append((str(snippet_id), code))
    return pairs


class RayVerifier:
    """`verify(snippets)` over a `ShardedClient` (one header, one server).

    The client lives on a private event loop in a daemon thread, so `verify`
    blocks in plain trainer code and `averify` can be awaited from inside
    async Ray actors. Pickling keeps only the addresses and client settings:
    a copy sent to a Ray task opens its own channels and owns no servers.
    """

    def __init__(
        self, addresses: Iterable[str], *, token: str | None = None, **client_kwargs
    ) -> None:
        self.addresses = sorted(set(addresses))
        self._token = token
        self._client_kwargs = client_kwargs
        self.deployment = None  # set by leanrpc.ray.connect: close() shuts it down
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: ShardedClient | None = None

    def __reduce__(self):
        return (_rebuild, (self.addresses, self._token, self._client_kwargs))

    @property
    def ring(self) -> HeaderRing:
        """The ring `verify` routes by (which server owns which header)."""
        return HeaderRing(self.addresses)

    def _ensure_client(self) -> ShardedClient:
        with self._lock:
            if self._client is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="leanrpc-ray-verifier", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                self._client = self._submit(self._make_client()).result()
            return self._client

    async def _make_client(self) -> ShardedClient:
        # gRPC aio channels belong to the loop they are made on.
        return ShardedClient(self.addresses, token=self._token, **self._client_kwargs)

    def _submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def verify(self, snippets: Iterable, **kwargs) -> list[Result]:
        """Verifies snippets (str, (id, code) or {"id", "code"}); input order kept.

        Args:
            kwargs: per-batch options of `AsyncClient.verify` (timeout_s, infotree...).

        Returns:
            One `Result` per snippet; `result.verifier` says who answered.
        """
        client = self._ensure_client()
        return self._submit(client.verify(_as_pairs(snippets), **kwargs)).result()

    async def averify(self, snippets: Iterable, **kwargs) -> list[Result]:
        """`verify` for callers that already run an event loop."""
        client = self._ensure_client()
        return await asyncio.wrap_future(self._submit(client.verify(_as_pairs(snippets), **kwargs)))

    def close(self) -> None:
        """Closes the channels; shuts the servers down if `connect` made them."""
        with self._lock:
            client, loop, thread = self._client, self._loop, self._thread
            self._client = self._loop = self._thread = None
        if client is not None:
            asyncio.run_coroutine_threadsafe(client.close(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
        if self.deployment is not None:
            deployment, self.deployment = self.deployment, None
            deployment.shutdown()

    def __enter__(self) -> "RayVerifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _rebuild(addresses, token, client_kwargs) -> RayVerifier:
    return RayVerifier(addresses, token=token, **client_kwargs)
