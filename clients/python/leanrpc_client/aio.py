"""The asyncio client: `async with AsyncClient(address) as client: ...`.

Owns: the channel, unary calls with retry, and `verify` over VerifyStream
(bounded window, input order kept, re-sends of refused snippets).
May import: _proto, _types, _convert, _retry, _streams, progress, prover,
formalizer, sessions.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Callable, Iterable, Sequence

import grpc

from ._convert import (
    _as_pinned,
    _header_metadata,
    _options,
    declarations_from_pb,
    keywords_checked,
    result_from_pb,
)
from ._proto import pb, pb_grpc
from ._retry import (
    RETRYABLE_CODES,
    backoff_s,
    client_error,
    not_serving,
    not_serving_error,
    resend_hint_s,
    stream_code,
)
from ._streams import broken, settle
from ._types import Result
from .formalizer import FormalizerCalls
from .progress import Progress
from .prover import ProverCalls
from .sessions import SessionCalls

# Addresses whose token check was probed by this process (AsyncClient).
_PROBED: set[str] = set()


def _in_order(
    keys: list[str], items: list[tuple[str, str]], results: dict[str, Result]
) -> list[Result]:
    ordered = []
    for key, (sid, _code) in zip(keys, items):
        result = results.get(key)
        if result is not None:
            result.id = sid
            ordered.append(result)
    return ordered


class _Notifying(dict):
    """The results dict of one `verify` that tells `on_result` of each final answer."""

    def __init__(self, keys: list[str], items: list[tuple[str, str]], on_result) -> None:
        super().__init__()
        self._where = {key: n for n, key in enumerate(keys)}
        self._items = items
        self._on_result = on_result

    def __setitem__(self, key: str, result: Result) -> None:
        super().__setitem__(key, result)
        n = self._where[key]
        result.id = self._items[n][0]
        if not not_serving(result):  # raised as UNAVAILABLE at the end instead
            self._on_result(n, result)


def channel_options(max_message_mb: int, http2_bdp_probe: bool = False) -> list[tuple[str, int]]:
    """The gRPC channel options of every client of this package."""
    return [
        ("grpc.max_receive_message_length", max_message_mb * 2**20),
        ("grpc.max_send_message_length", max_message_mb * 2**20),
        # Each client owns its connection. gRPC otherwise shares one connection per
        # address among every channel of the process with the same options, with
        # its reconnect backoff: a client made after a server came back on the
        # same port got UNAVAILABLE on every call while some older channel to the
        # gone server waited out its backoff (1 s, growing to 2 minutes).
        ("grpc.use_local_subchannel_pool", 1),
        # A server that comes back is noticed within a second, not after the
        # channel's reconnect backoff has grown toward 2 minutes (the Node client's
        # settings): a trainer's cached reward client gave no reward for that long.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # No HTTP/2 BDP probing unless asked (a PING per burst of data received, to
        # grow the flow-control window toward the bandwidth-delay product): each
        # message's own length opens the window once it is read, and every PING costs
        # the server a wakeup of its gRPC threads to answer it (the server turns its
        # own off too, `[server] http2_bdp_probe`; issue 38, benchmarks/RESULTS.md).
        # A client far from its server that streams many small messages asks for it.
        ("grpc.http2.bdp_probe", int(http2_bdp_probe)),
    ]


class AsyncClient(ProverCalls, FormalizerCalls, SessionCalls):
    """asyncio client. Use as `async with AsyncClient(addr) as c:`."""

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        max_retries: int = 5,
        backoff_s: float = 0.2,
        max_message_mb: int = 64,
        warn_unchecked_token: bool = True,
        http2_bdp_probe: bool = False,
    ) -> None:
        self._address = address
        # With a token, the first call asks once, without it, whether the server
        # checks tokens; one that does not gets a warning, not silence. Once per
        # process and address: where tokens are checked, the probe is one refused call.
        self._probe_token = bool(token) and warn_unchecked_token and address not in _PROBED
        _PROBED.add(address)
        options = channel_options(max_message_mb, http2_bdp_probe)
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        self._stub = pb_grpc.VerifierStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._max_retries = max_retries
        self._backoff_s = backoff_s

    @property
    def address(self) -> str:
        """The server address this client was made for ("host:port")."""
        return self._address

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _warn_if_token_unchecked(self) -> None:
        if not self._probe_token:
            return
        self._probe_token = False
        try:  # a tokenless GetServerInfo is refused wherever tokens are checked
            await self._stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=5.0)
        except grpc.aio.AioRpcError:
            return
        warnings.warn(
            f"the leanrpc server at {self._address} checks no tokens; token= is not used",
            UserWarning,
            stacklevel=2,
        )

    async def _call(self, method, request, timeout: float | None, extra_metadata: tuple = ()):
        await self._warn_if_token_unchecked()
        attempt = 0
        while True:
            try:
                return await method(
                    request, timeout=timeout, metadata=self._metadata + extra_metadata
                )
            except grpc.aio.AioRpcError as exc:
                attempt += 1
                if exc.code() not in RETRYABLE_CODES or attempt > self._max_retries:
                    raise client_error(exc) from exc
                await asyncio.sleep(backoff_s(self._backoff_s, attempt, exc=exc))

    @keywords_checked
    async def verify_batch(
        self,
        snippets: Sequence,
        *,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        reuse: bool = True,
        check_axioms: bool | None = None,
        deadline_s: float | None = None,
        session: str = "",
        profile: str = "",
        cache: bool | None = None,
        references: Sequence[str | None] | None = None,
        all_tactics: bool = False,
        root_goals: bool = False,
        declarations: bool = False,
    ) -> list[Result]:
        """One unary Verify call: results in input order. With `session`, each
        snippet (no imports) runs on that session's env 0. `profile` names the
        server's REPL profile (toolchain) to run on; "" is its default.
        `cache=False` bypasses the server's result cache (None: its default).
        `references` pins each snippet to a statement (one per snippet, ""
        for none; a dict snippet may carry its own "reference").
        `all_tactics`, `root_goals`, `declarations` are the REPL's command
        options (Result.tactics, Result.root_goals, Result.declarations_json;
        docs/CLIENTS.md)."""
        items, refs = _as_pinned(snippets, references, "verify_batch")
        request = pb.VerifyRequest(
            snippets=[pb.Snippet(id=i, code=c, reference=r) for (i, c), r in zip(items, refs)],
            options=_options(
                timeout_s,
                infotree,
                reuse,
                check_axioms,
                session,
                profile,
                cache,
                all_tactics=all_tactics,
                root_goals=root_goals,
                declarations=declarations,
            ),
        )
        response = await self._call(
            self._stub.Verify, request, deadline_s, _header_metadata(c for _i, c in items)
        )
        return [result_from_pb(r) for r in response.results]

    @keywords_checked
    async def verify(
        self,
        snippets: Iterable,
        *,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        reuse: bool = True,
        check_axioms: bool | None = None,
        window: int = 256,
        progress: bool | None = None,
        session: str = "",
        profile: str = "",
        cache: bool | None = None,
        references: Iterable[str | None] | None = None,
        on_result: Callable[[int, Result], None] | None = None,
        all_tactics: bool = False,
        root_goals: bool = False,
        declarations: bool = False,
    ) -> list[Result]:
        """Verifies any number of snippets over VerifyStream; input order kept.
        `references` pins each snippet to a statement, as in `verify_batch`.
        `on_result(index, result)` is called as each final result arrives
        (any order; `index` is the snippet's position in the input).
        With `session`, each snippet (no imports) runs on that session's env 0
        (an unknown session gives that snippet a REJECTED result). `profile`
        names the server's REPL profile (toolchain); "" is its default.
        `cache=False` bypasses the server's result cache (None: its default).
        `all_tactics`, `root_goals`, `declarations`: as in `verify_batch`.

        Snippets are str, (id, code) pairs, or {"id", "code"} dicts. Snippets
        whose stream broke with UNAVAILABLE (or ended under a write in flight,
        which grpc reports as a local INTERNAL), and those the server answered
        REJECTED with a `retry_after` (queue full, shutting down: they never
        ran), are re-sent with backoff, the hint as its floor; after
        max_retries those REJECTED results are returned as they are. A failure after
        retries raises ClientError whose `partial` holds the results received;
        so does a snippet refused because no REPL worker can start (UNAVAILABLE,
        reason NOT_SERVING, as a unary Verify fails).
        """
        items, refs = _as_pinned(snippets, references)
        await self._warn_if_token_unchecked()
        keys = [f"{n}:{sid}" for n, (sid, _code) in enumerate(items)]
        pinned = {key: ref for key, ref in zip(keys, refs) if ref}
        results: dict[str, Result] = {}
        bar = Progress(len(items), progress)
        options = _options(
            timeout_s,
            infotree,
            reuse,
            check_axioms,
            session,
            profile,
            cache,
            all_tactics=all_tactics,
            root_goals=root_goals,
            declarations=declarations,
        )
        attempt = 0
        if on_result is not None:
            results = _Notifying(keys, items, on_result)
        try:
            while len(results) < len(items):
                todo = [(k, items[n][1]) for n, k in enumerate(keys) if k not in results]
                resend: dict[str, tuple[Result, float]] = {}
                try:
                    await self._stream_once(todo, options, window, results, bar, resend, pinned)
                except grpc.aio.AioRpcError as exc:
                    attempt += 1
                    if stream_code(exc) not in RETRYABLE_CODES or attempt > self._max_retries:
                        partial = _in_order(keys, items, results)
                        raise client_error(exc, partial) from exc
                    hint = max((h for _r, h in resend.values()), default=0.0)
                    await asyncio.sleep(backoff_s(self._backoff_s, attempt, hint, exc=exc))
                    continue
                if resend:
                    attempt += 1
                    if attempt > self._max_retries:
                        # Out of retries: the REJECTED results are the answers.
                        for key, (result, _hint) in resend.items():
                            results[key] = result
                            bar.update(1)
                    else:
                        hint = max(h for _r, h in resend.values())
                        await asyncio.sleep(backoff_s(self._backoff_s, attempt, hint))
        finally:
            bar.close()
        ordered = _in_order(keys, items, results)
        down = not_serving_error(ordered)
        if down is not None:
            raise down
        return ordered

    async def _stream_once(self, todo, options, window, results, bar, resend, pinned=None) -> None:
        call = self._stub.VerifyStream(
            metadata=self._metadata + _header_metadata(c for _k, c in todo)
        )
        slots = asyncio.Semaphore(window)

        async def send() -> None:
            await call.write(pb.VerifyStreamRequest(options=options))
            for key, code in todo:
                await slots.acquire()
                reference = (pinned or {}).get(key, "")
                await call.write(
                    pb.VerifyStreamRequest(
                        snippet=pb.Snippet(id=key, code=code, reference=reference)
                    )
                )
            await call.done_writing()

        sender = asyncio.ensure_future(send())
        try:
            expected = len(todo)
            received = 0
            while received < expected:
                message = await call.read()
                if message is grpc.aio.EOF:
                    break
                received += 1
                slots.release()
                result = result_from_pb(message.result)
                hint = resend_hint_s(result)
                if hint is not None:  # refused unrun (overload, shutdown): send again
                    resend[result.id] = (result, hint)
                    continue
                results[result.id] = result
                if bar is not None:
                    bar.update(1)
            # Short of answers the call ended first: the sender may wait for a
            # slot no answer will free. Every answer in: all was written, and a
            # half-close that raced the server's end changes nothing.
            await settle(sender, cancel=received < expected)
            # Always read the call's end: leaving before it cancels the call,
            # so the server would log a stream that delivered all as CANCELLED.
            code = await call.code()
            if received < expected and code is grpc.StatusCode.OK:
                # The server answers every snippet it read: it stopped reading (shutting down).
                raise broken(f"stream ended with {expected - received} snippets unread")
            if received < expected:
                raise grpc.aio.AioRpcError(
                    code,
                    await call.initial_metadata(),
                    await call.trailing_metadata(),
                    details=await call.details(),
                )
        finally:
            sender.cancel()

    @keywords_checked
    async def extract(self, code: str, *, timeout_s: float = 0.0, lz4: bool = False):
        """Returns (Result, [Declaration])."""
        request = pb.ExtractRequest(
            code=code, options=_options(timeout_s, "original", True, False), lz4=lz4
        )
        response = await self._call(self._stub.Extract, request, None)
        found = response.declarations
        if response.WhichOneof("steps") == "compressed":
            import lz4.frame

            found = pb.ExtractedDeclarations()
            found.ParseFromString(lz4.frame.decompress(response.compressed))
        return result_from_pb(response.result), declarations_from_pb(found.declarations)

    async def score_formalization(
        self,
        candidates: Sequence[dict],
        *,
        weights: dict | None = None,
        triviality: bool | None = None,
        timeout_is_failure: bool | None = None,
        timeout_s: float = 0.0,
        profile: str = "",
        deadline_s: float | None = None,
    ) -> pb.ScoreFormalizationResponse:
        """The composite gated reward of autoformalization (docs/REWARDS.md): one
        score per {"completion", "reference", "header"?, "id"?} dict, in order.
        `weights` maps well_formed / compiles / faithfulness to credits (unset: the
        server's defaults, echoed in the response)."""
        request = pb.ScoreFormalizationRequest(
            candidates=[pb.FormalizationCandidate(**c) for c in candidates],
            weights=pb.FormalizationWeights(**(weights or {})),
            options=_options(timeout_s, None, True, None, profile=profile),
        )
        if triviality is not None:
            request.triviality = triviality
        if timeout_is_failure is not None:
            request.timeout_is_failure = timeout_is_failure
        return await self._call(self._stub.ScoreFormalization, request, deadline_s)

    async def server_info(self) -> pb.GetServerInfoResponse:
        return await self._call(self._stub.GetServerInfo, pb.GetServerInfoRequest(), 10.0)
