"""Python client for the leanrpc Verifier service.

    from leanrpc.client import Client
    with Client("127.0.0.1:50051") as client:
        results = client.verify(["import Mathlib\\ntheorem t : 1 + 1 = 2 := by norm_num"])
        print(results[0].status)            # "VALID"

`AsyncClient` has the same methods as coroutines. `verify` sends large lists
over one VerifyStream (bounded in-flight window), retries UNAVAILABLE and
RESOURCE_EXHAUSTED with exponential backoff, and shows a progress bar when
asked (or for long batches on a terminal). Results are plain dataclasses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sys
import time
from typing import Iterable, Sequence

import grpc

from ..v1 import verifier_pb2 as pb
from ..v1 import verifier_pb2_grpc as pb_grpc

__all__ = ["AsyncClient", "Client", "Message", "Result", "TacticStep", "Declaration", "ClientError"]

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
    warm_header: bool
    reused_prefix_chars: int
    attempts: int
    verifier: str  # "lean" or "stand-in"
    verifier_description: str
    infotree_json: str = ""
    axioms: list[str] = dataclasses.field(default_factory=list)

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
        warm_header=r.reuse.warm_header,
        reused_prefix_chars=r.reuse.reused_prefix_chars,
        attempts=r.reuse.attempts,
        verifier=r.verifier.kind,
        verifier_description=r.verifier.description,
        infotree_json=r.infotree_json,
        axioms=list(r.axioms),
    )


def _options(timeout_s: float, infotree: str | None, reuse: bool, check_axioms: bool) -> pb.VerifyOptions:
    if infotree not in _INFOTREE:
        raise ValueError(f"infotree must be one of {sorted(k for k in _INFOTREE if k)}")
    return pb.VerifyOptions(timeout_s=timeout_s, infotree=_INFOTREE[infotree], reuse=reuse, check_axioms=check_axioms)


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


class AsyncClient:
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

    async def _call(self, method, request, timeout: float | None):
        attempt = 0
        while True:
            try:
                return await method(request, timeout=timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as exc:
                attempt += 1
                if exc.code() not in _RETRYABLE or attempt > self._max_retries:
                    raise ClientError(exc.code(), exc.details() or "") from exc
                await asyncio.sleep(self._retry_delay(exc, attempt))

    def _retry_delay(self, exc: grpc.aio.AioRpcError, attempt: int) -> float:
        for key, value in exc.trailing_metadata() or ():
            if key == "retry-after-ms":
                return int(value) / 1000
        return self._backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random())

    async def verify_batch(
        self,
        snippets: Sequence,
        *,
        timeout_s: float = 0.0,
        infotree: str | None = None,
        reuse: bool = True,
        check_axioms: bool = False,
        deadline_s: float | None = None,
    ) -> list[Result]:
        """One unary Verify call: results in input order."""
        items = _as_snippets(snippets)
        request = pb.VerifyRequest(
            snippets=[pb.Snippet(id=i, code=c) for i, c in items],
            options=_options(timeout_s, infotree, reuse, check_axioms),
        )
        response = await self._call(self._stub.Verify, request, deadline_s)
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
    ) -> list[Result]:
        """Verifies any number of snippets over VerifyStream; input order kept.

        Snippets are str, (id, code) pairs, or {"id", "code"} dicts. Snippets
        whose stream broke with UNAVAILABLE are re-sent (with backoff).
        """
        items = _as_snippets(snippets)
        keys = [f"{n}:{sid}" for n, (sid, _code) in enumerate(items)]
        results: dict[str, Result] = {}
        show = progress if progress is not None else (len(items) >= 200 and sys.stderr.isatty())
        bar = None
        if show:
            from tqdm import tqdm

            bar = tqdm(total=len(items), unit="snippet", desc="verify")
        options = _options(timeout_s, infotree, reuse, check_axioms)
        attempt = 0
        try:
            while len(results) < len(items):
                todo = [(k, items[n][1]) for n, k in enumerate(keys) if k not in results]
                try:
                    await self._stream_once(todo, options, window, results, bar)
                except grpc.aio.AioRpcError as exc:
                    attempt += 1
                    if exc.code() not in _RETRYABLE or attempt > self._max_retries:
                        raise ClientError(exc.code(), exc.details() or "") from exc
                    await asyncio.sleep(self._retry_delay(exc, attempt))
        finally:
            if bar is not None:
                bar.close()
        ordered = []
        for key, (sid, _code) in zip(keys, items):
            result = results[key]
            result.id = sid
            ordered.append(result)
        return ordered

    async def _stream_once(self, todo, options, window, results, bar) -> None:
        call = self._stub.VerifyStream(metadata=self._metadata)
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
                results[message.result.id] = result_from_pb(message.result)
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


class Client:
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
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._async.close())
            self._loop.close()

    def verify(self, snippets: Iterable, **kwargs) -> list[Result]:
        return self._loop.run_until_complete(self._async.verify(snippets, **kwargs))

    def verify_batch(self, snippets: Sequence, **kwargs) -> list[Result]:
        return self._loop.run_until_complete(self._async.verify_batch(snippets, **kwargs))

    def extract(self, code: str, **kwargs):
        return self._loop.run_until_complete(self._async.extract(code, **kwargs))

    def server_info(self) -> pb.ServerInfo:
        return self._loop.run_until_complete(self._async.server_info())
