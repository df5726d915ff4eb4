"""Python client for the leanrpc Verifier and Prover services.

    from leanrpc.client import Client
    with Client("127.0.0.1:50051") as client:
        results = client.verify(["import Mathlib\\ntheorem t : 1 + 1 = 2 := by norm_num"])
        print(results[0].status)            # "VALID"

`AsyncClient` has the same methods as coroutines. `verify` sends large lists
over one VerifyStream (bounded in-flight window), retries UNAVAILABLE and
RESOURCE_EXHAUSTED with exponential backoff, and shows a progress bar when
asked (or for long batches on a terminal). Results are plain dataclasses.
Proof search (start_proof, run_tactic, expand, best_first_search): see
`leanrpc.client.prover` and docs/PROVER.md.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import random
import re
import sys
from typing import Iterable, Sequence

import grpc

from ..v1 import verifier_pb2 as pb
from ..v1 import verifier_pb2_grpc as pb_grpc
from .prover import ProofStart, ProofState, ProverCalls, SearchResult, SyncProverCalls, TacticResult, best_first_search

__all__ = ["AsyncClient", "Client", "Message", "Result", "SessionResult", "TacticStep", "Declaration", "ClientError", "header_hash", "HEADER_HASH_KEY",
           "ProofStart", "ProofState", "SearchResult", "TacticResult", "best_first_search"]

_STATUS_NAMES = {v: k for k, v in pb.Status.items()}
_SEVERITY_NAMES = {v: k for k, v in pb.Severity.items()}
_INFOTREE = {
    None: pb.INFOTREE_MODE_UNSPECIFIED,
    "original": pb.INFOTREE_MODE_ORIGINAL,
    "substantive": pb.INFOTREE_MODE_SUBSTANTIVE,
    "tactics": pb.INFOTREE_MODE_TACTICS,
    "full": pb.INFOTREE_MODE_FULL,
}
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
# How VerifyStream answers a snippet the full queue refused (status REJECTED).
_OVERLOADED = re.compile(r"^RESOURCE_EXHAUSTED: .*?(?:retry after (?P<ms>\d+) ms)?$", re.S)
# Request metadata a header-hash balancer (Envoy ring hash) routes on, so one
# import header keeps reaching the replicas that hold it warm (docs/DEPLOY.md).
HEADER_HASH_KEY = "x-leanrpc-header-hash"


def header_hash(code: str) -> str:
    """sha256 of the leading `import` lines (stripped, joined by newlines), 16 hex digits.

    The Node client (clients/node) computes the same value.
    """
    imports = []
    for raw in code.split("\n"):
        line = raw.strip()
        if not line or line.startswith("--"):
            continue
        if not line.startswith("import "):
            break
        imports.append(line)
    return hashlib.sha256("\n".join(imports).encode()).hexdigest()[:16]


def _header_metadata(codes: Iterable[str]) -> tuple[tuple[str, str], ...]:
    # A call carries one key: the batch's most common header decides.
    counts = collections.Counter(header_hash(code) for code in codes)
    return ((HEADER_HASH_KEY, counts.most_common(1)[0][0]),) if counts else ()


class ClientError(Exception):
    """An RPC failed for good (after retries)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


@dataclasses.dataclass
class Message:
    severity: str
    line: int
    column: int
    end_line: int | None
    end_column: int | None
    text: str


@dataclasses.dataclass
class Result:
    id: str
    status: str  # VALID, INVALID, SORRY, TIMEOUT, CRASH, OUT_OF_MEMORY, REJECTED, CANCELLED
    messages: list[Message]
    sorries: list[dict]
    error: str
    time_total_s: float
    time_queue_s: float
    time_header_s: float
    time_body_s: float
    time_boot_s: float
    warm_header: bool
    reused_prefix_chars: int
    attempts: int
    verifier: str  # "lean" or "stand-in"
    verifier_description: str
    infotree_json: str = ""
    axioms: list[str] = dataclasses.field(default_factory=list)
    worker: str = ""  # the pool worker that answered (Reuse.worker)

    @property
    def valid(self) -> bool:
        return self.status == "VALID"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class TacticStep:
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    goals_before: list[str]
    goals_after: list[str]
    kind: str


@dataclasses.dataclass
class Declaration:
    name: str
    steps: list[TacticStep]


def result_from_pb(r: pb.Result) -> Result:
    return Result(
        id=r.id,
        status=_STATUS_NAMES.get(r.status, str(r.status)),
        messages=[
            Message(
                severity=_SEVERITY_NAMES.get(m.severity, str(m.severity)),
                line=m.start.line,
                column=m.start.column,
                end_line=m.end.line if m.HasField("end") else None,
                end_column=m.end.column if m.HasField("end") else None,
                text=m.text,
            )
            for m in r.messages
        ],
        sorries=[
            {"line": s.start.line, "column": s.start.column, "goal": s.goal} for s in r.sorries
        ],
        error=r.error,
        time_total_s=r.timings.total_s,
        time_queue_s=r.timings.queue_s,
        time_header_s=r.timings.header_s,
        time_body_s=r.timings.body_s,
        time_boot_s=r.timings.boot_s,
        warm_header=r.reuse.warm_header,
        reused_prefix_chars=r.reuse.reused_prefix_chars,
        attempts=r.reuse.attempts,
        verifier=r.verifier.kind,
        verifier_description=r.verifier.description,
        infotree_json=r.infotree_json,
        axioms=list(r.axioms),
        worker=r.reuse.worker,
    )


@dataclasses.dataclass
class SessionResult:
    """A session call's outcome: `env` is the new session env id (None if
    the code made none); it stays valid across server-side worker restarts."""

    session: str
    env: int | None
    result: Result
    replayed_commands: int = 0


def session_result_from_pb(r: pb.SessionResponse) -> SessionResult:
    return SessionResult(
        session=r.session,
        env=r.env if r.HasField("env") else None,
        result=result_from_pb(r.result),
        replayed_commands=r.replayed_commands,
    )


def _options(timeout_s: float, infotree: str | None, reuse: bool, check_axioms: bool, session: str = "") -> pb.VerifyOptions:
    if infotree not in _INFOTREE:
        raise ValueError(f"infotree must be one of {sorted(k for k in _INFOTREE if k)}")
    return pb.VerifyOptions(
        timeout_s=timeout_s, infotree=_INFOTREE[infotree], reuse=reuse, check_axioms=check_axioms, session=session
    )


def _as_snippets(snippets: Iterable) -> list[tuple[str, str]]:
    out = []
    for index, item in enumerate(snippets):
        if isinstance(item, str):
            out.append((str(index), item))
        elif isinstance(item, dict):
            out.append((str(item.get("id", index)), item["code"]))
        else:
            snippet_id, code = item
            out.append((str(snippet_id), code))
    return out


class AsyncClient(ProverCalls):
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
    ) -> None:
        options = [
            ("grpc.max_receive_message_length", max_message_mb * 2**20),
            ("grpc.max_send_message_length", max_message_mb * 2**20),
        ]
        if credentials is not None:
            self._channel = grpc.aio.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        self._stub = pb_grpc.VerifierStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._max_retries = max_retries
        self._backoff_s = backoff_s

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method, request, timeout: float | None, extra_metadata: tuple = ()):
        attempt = 0
        while True:
            try:
                return await method(request, timeout=timeout, metadata=self._metadata + extra_metadata)
            except grpc.aio.AioRpcError as exc:
                attempt += 1
                if exc.code() not in _RETRYABLE or attempt > self._max_retries:
                    raise ClientError(exc.code(), exc.details() or "") from exc
                await asyncio.sleep(self._retry_delay(exc, attempt))

    def _retry_delay(self, exc: grpc.aio.AioRpcError | None, attempt: int, hint_s: float = 0.0) -> float:
        # The server's retry-after hint is a floor; the exponential backoff
        # makes sure a long overload is not hammered at the hint's pace.
        for key, value in (exc.trailing_metadata() or ()) if exc is not None else ():
            if key == "retry-after-ms":
                hint_s = max(hint_s, int(value) / 1000)
        return max(hint_s, self._backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random()))

    async def verify_batch(
        self,
        snippets: Sequence,
        *,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        reuse: bool = True,
        check_axioms: bool = False,
        deadline_s: float | None = None,
        session: str = "",
    ) -> list[Result]:
        """One unary Verify call: results in input order. With `session`, each
        snippet (no imports) runs on that session's env 0."""
        items = _as_snippets(snippets)
        request = pb.VerifyRequest(
            snippets=[pb.Snippet(id=i, code=c) for i, c in items],
            options=_options(timeout_s, infotree, reuse, check_axioms, session),
        )
        response = await self._call(self._stub.Verify, request, deadline_s, _header_metadata(c for _i, c in items))
        return [result_from_pb(r) for r in response.results]

    async def verify(
        self,
        snippets: Iterable,
        *,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        reuse: bool = True,
        check_axioms: bool = False,
        window: int = 256,
        progress: bool | None = None,
        session: str = "",
    ) -> list[Result]:
        """Verifies any number of snippets over VerifyStream; input order kept.
        With `session`, each snippet (no imports) runs on that session's env 0
        (an unknown session gives that snippet a REJECTED result).

        Snippets are str, (id, code) pairs, or {"id", "code"} dicts. Snippets
        whose stream broke with UNAVAILABLE, or that the server's full queue
        refused (REJECTED, error "RESOURCE_EXHAUSTED: ... retry after N ms"),
        are re-sent with backoff; after max_retries those REJECTED results
        are returned as they are.
        """
        items = _as_snippets(snippets)
        keys = [f"{n}:{sid}" for n, (sid, _code) in enumerate(items)]
        results: dict[str, Result] = {}
        show = progress if progress is not None else (len(items) >= 200 and sys.stderr.isatty())
        bar = None
        if show:
            from tqdm import tqdm

            bar = tqdm(total=len(items), unit="snippet", desc="verify")
        options = _options(timeout_s, infotree, reuse, check_axioms, session)
        attempt = 0
        try:
            while len(results) < len(items):
                todo = [(k, items[n][1]) for n, k in enumerate(keys) if k not in results]
                overloaded: dict[str, tuple[Result, float]] = {}
                try:
                    await self._stream_once(todo, options, window, results, bar, overloaded)
                except grpc.aio.AioRpcError as exc:
                    attempt += 1
                    if exc.code() not in _RETRYABLE or attempt > self._max_retries:
                        raise ClientError(exc.code(), exc.details() or "") from exc
                    await asyncio.sleep(self._retry_delay(exc, attempt))
                    continue
                if overloaded:
                    attempt += 1
                    if attempt > self._max_retries:
                        # Out of retries: the REJECTED results are the answers.
                        for key, (result, _hint) in overloaded.items():
                            results[key] = result
                            if bar is not None:
                                bar.update(1)
                    else:
                        hint = max(h for _r, h in overloaded.values())
                        await asyncio.sleep(self._retry_delay(None, attempt, hint))
        finally:
            if bar is not None:
                bar.close()
        ordered = []
        for key, (sid, _code) in zip(keys, items):
            result = results[key]
            result.id = sid
            ordered.append(result)
        return ordered

    async def _stream_once(self, todo, options, window, results, bar, overloaded) -> None:
        call = self._stub.VerifyStream(metadata=self._metadata + _header_metadata(c for _k, c in todo))
        slots = asyncio.Semaphore(window)

        async def send() -> None:
            await call.write(pb.VerifyStreamRequest(options=options))
            for key, code in todo:
                await slots.acquire()
                await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id=key, code=code)))
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
                refused = _OVERLOADED.match(result.error) if result.status == "REJECTED" else None
                if refused:
                    overloaded[result.id] = (result, int(refused.group("ms") or 0) / 1000)
                    continue
                results[result.id] = result
                if bar is not None:
                    bar.update(1)
            await sender
            if received < expected:
                code = await call.code()
                if code is not grpc.StatusCode.OK:
                    raise grpc.aio.AioRpcError(code, await call.initial_metadata(), await call.trailing_metadata(), details=await call.details())
        finally:
            sender.cancel()

    async def extract(self, code: str, *, timeout_s: float = 0.0, lz4: bool = False):
        """Returns (Result, [Declaration])."""
        request = pb.ExtractRequest(code=code, options=_options(timeout_s, "original", True, False), lz4=lz4)
        response = await self._call(self._stub.Extract, request, None)
        declarations = response.declarations
        if response.compressed:
            import lz4.frame

            decoded = pb.ExtractedDeclarations()
            decoded.ParseFromString(lz4.frame.decompress(response.compressed))
            declarations = decoded.declarations
        return result_from_pb(response.result), [
            Declaration(
                name=d.name,
                steps=[
                    TacticStep(
                        text=s.text,
                        start=(s.start.line, s.start.column),
                        end=(s.end.line, s.end.column),
                        goals_before=list(s.goals_before),
                        goals_after=list(s.goals_after),
                        kind=s.kind,
                    )
                    for s in d.steps
                ],
            )
            for d in declarations
        ]

    async def server_info(self) -> pb.ServerInfo:
        return await self._call(self._stub.GetServerInfo, pb.GetServerInfoRequest(), 10.0)

    async def open_session(
        self, code: str, *, name: str = "", timeout_s: float = 0.0, infotree: str | None = None,
        deadline_s: float | None = None,
    ) -> SessionResult:
        """Opens a session from a header (+ shared preamble); its state is env 0."""
        request = pb.OpenSessionRequest(name=name, code=code, options=_options(timeout_s, infotree, True, False))
        return session_result_from_pb(await self._call(self._stub.OpenSession, request, deadline_s))

    async def run_in_session(
        self, session: str, code: str, *, env: int | None = None, timeout_s: float = 0.0,
        infotree: str | None = None, deadline_s: float | None = None,
    ) -> SessionResult:
        """Runs commands (no imports) on session env `env` (default 0)."""
        request = pb.RunInSessionRequest(session=session, code=code, options=_options(timeout_s, infotree, True, False))
        if env is not None:
            request.env = env
        return session_result_from_pb(await self._call(self._stub.RunInSession, request, deadline_s))

    async def close_session(self, session: str) -> bool:
        response = await self._call(self._stub.CloseSession, pb.CloseSessionRequest(session=session), 30.0)
        return response.closed


class Client(SyncProverCalls):
    """Blocking client: the AsyncClient run on a private event loop."""

    def __init__(self, address: str = "127.0.0.1:50051", **kwargs) -> None:
        self._loop = asyncio.new_event_loop()
        self._async = self._loop.run_until_complete(self._make(address, kwargs))

    @staticmethod
    async def _make(address, kwargs) -> AsyncClient:
        return AsyncClient(address, **kwargs)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._loop.run_until_complete(self._async.close())
            # gRPC leaves status-watcher tasks behind; finish them as
            # asyncio.run would, so closing the loop prints no warnings.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    def verify(self, snippets: Iterable, **kwargs) -> list[Result]:
        return self._loop.run_until_complete(self._async.verify(snippets, **kwargs))

    def verify_batch(self, snippets: Sequence, **kwargs) -> list[Result]:
        return self._loop.run_until_complete(self._async.verify_batch(snippets, **kwargs))

    def extract(self, code: str, **kwargs):
        return self._loop.run_until_complete(self._async.extract(code, **kwargs))

    def server_info(self) -> pb.ServerInfo:
        return self._loop.run_until_complete(self._async.server_info())

    def open_session(self, code: str, **kwargs) -> SessionResult:
        return self._loop.run_until_complete(self._async.open_session(code, **kwargs))

    def run_in_session(self, session: str, code: str, **kwargs) -> SessionResult:
        return self._loop.run_until_complete(self._async.run_in_session(session, code, **kwargs))

    def close_session(self, session: str) -> bool:
        return self._loop.run_until_complete(self._async.close_session(session))
