"""Load and fault harness shared by tests/reliability and benchmarks/reliability_report.py.

Everything runs on loopback against the stand-in REPL. The server runs in
this process (so tests can look at the pool); the load generator is a set of
raw VerifyStream calls, each keeping a bounded window in flight.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import random
import signal
import time

import grpc
import psutil
from google.protobuf import duration_pb2

from leanrpc.app import App, create_server
from leanrpc.config import Config
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from testkit import descendants, loopback_config  # noqa: F401  (re-exported)

HEADER = "import Mathlib\n\n"
STATUS_NAME = {value: name.removeprefix("STATUS_") for name, value in pb.Status.items()}

# Fault bodies: directives go after the first declaration line (the stand-in
# reads them from the body). `expected` is the set of statuses that are
# correct for each kind.
FAULTS = {
    "ok": ("theorem t{i} (x : Nat) : x + {i} = x + {i} := by rfl\n", {"VALID"}),
    "sorry": ("theorem t{i} : {i} = {i} := by\n  sorry\n", {"SORRY"}),
    "hang": ("theorem t{i} : True := trivial\n--@standin: hang\n", {"TIMEOUT"}),
    "oom": (
        "theorem t{i} : True := trivial\n--@standin: grow=600\n--@standin: hang\n",
        {"OUT_OF_MEMORY"},
    ),
    "garbage": ("theorem t{i} : True := trivial\n--@standin: garbage=inline\n", {"CRASH"}),
    # The answer stands; the worker is recycled after it.
    "stderr": ("theorem t{i} : True := trivial\n--@standin: stderr=2000000\n", {"VALID"}),
    "crash": ("theorem t{i} : True := trivial\n--@standin: crash=kill\n", {"CRASH"}),
}


def snippet(kind: str, i: int) -> tuple[str, set[str]]:
    body, expected = FAULTS[kind]
    return HEADER + body.format(i=i), expected


# The fault mix used under load, spread evenly through the run.
FAULT_MIX = {"hang": 8, "oom": 8, "garbage": 12, "stderr": 40}


def fault_mix_items(total: int, mix: dict[str, int] = FAULT_MIX) -> list[tuple[str, str, set[str]]]:
    """`total` snippets, mostly "ok", with `mix` faults at even spacing.

    A worker killed by kill -9 can hit any snippet; once its retries are
    spent the correct answer is CRASH, so CRASH is allowed for every kind
    (the tests bound how often it may happen).
    """
    kinds = ["ok"] * total
    slot = 7
    for kind, count in mix.items():
        for _ in range(count):
            kinds[slot % total] = kind
            slot += total // sum(mix.values()) + 1
    items = []
    for i, kind in enumerate(kinds):
        code, expected = snippet(kind, i)
        items.append((f"{kind}-{i}", code, expected | {"CRASH"}))
    return items


def make_config(workers: int = 2, **overrides) -> Config:
    """A loopback config; overrides are `section__key=value`."""
    return loopback_config(workers, **overrides)


async def start_app(workers: int = 2, **overrides) -> App:
    return await create_server(make_config(workers, **overrides))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def fd_baseline() -> int:
    """Open fds once gRPC's process-wide resources exist (its pollers and
    wakeup sockets are created by the first server and kept for life)."""
    app = await start_app(workers=1)
    await run_streams(app.port, [("warm", snippet("ok", 0)[0], {"VALID"})], streams=1)
    await app.stop(1.0)
    await wait_no_descendants()
    return open_fds()


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


async def wait_for(predicate, timeout: float, what: str, interval: float = 0.02) -> None:
    """Polls a condition with a bound; raises AssertionError naming it."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


async def wait_no_descendants(timeout: float = 15.0) -> None:
    await wait_for(lambda: not descendants(), timeout, "all child processes to exit")


def worker_pids(app: App) -> list[int]:
    """Booted workers (idle, warming or busy); a kill during boot would be
    a boot failure, which the circuit breaker tests cover on their own."""
    return [w.pid for w in app.pool.workers if w.pid and (w.state.value == "idle" or w.reserved)]


@dataclasses.dataclass
class LoadReport:
    sent: int = 0
    answers: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    statuses: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    status_of: dict = dataclasses.field(default_factory=dict)  # id -> first status
    error_of: dict = dataclasses.field(default_factory=dict)  # id -> error, when not VALID/SORRY
    wrong: list = dataclasses.field(default_factory=list)
    duplicates: int = 0
    unknown: int = 0
    stream_errors: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def missing(self) -> int:
        return self.sent - len(self.answers)

    def by_kind(self) -> dict[str, collections.Counter]:
        """Statuses per fault kind, for ids named "<kind>-<n>"."""
        out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for sid, status in self.status_of.items():
            out[sid.rsplit("-", 1)[0]][status] += 1
        return dict(out)


async def run_streams(
    port: int,
    items: list[tuple[str, str, set[str]]],
    *,
    streams: int = 64,
    window: int = 4,
    timeout_s: float = 2.0,
    timeout_for=None,
    on_progress=None,
) -> LoadReport:
    """Sends (id, code, expected statuses) over `streams` VerifyStream calls.

    Every id must come back exactly once with a status in its expected set;
    anything else is recorded in the report for the caller to assert on.
    `timeout_for(id)`, if given, is each snippet's timeout (else `timeout_s`):
    snippets of one timeout share streams (a stream has one set of options),
    the streams split in proportion. A snippet that must answer whatever the
    machine's speed gets a long one; only those meant to time out a short one.
    """
    report = LoadReport(sent=len(items))
    expected = {sid: exp for sid, _code, exp in items}
    groups: dict[float, list] = collections.defaultdict(list)
    for item in items:
        groups[timeout_s if timeout_for is None else timeout_for(item[0])].append(item)
    shards = []  # (options, items) per stream
    for seconds, group in groups.items():
        options = pb.VerifyOptions(
            timeout=duration_pb2.Duration(seconds=int(seconds), nanos=round(seconds % 1 * 1e9))
        )
        count = max(1, round(streams * len(group) / len(items)))
        shards += [(options, group[k::count]) for k in range(count)]
    started = time.monotonic()

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.VerifierStub(channel)

        async def one_stream(options, shard) -> None:
            call = stub.VerifyStream()
            slots = asyncio.Semaphore(window)

            async def send() -> None:
                await call.write(pb.VerifyStreamRequest(options=options))
                for sid, code, _exp in shard:
                    await slots.acquire()
                    await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id=sid, code=code)))
                await call.done_writing()

            sender = asyncio.ensure_future(send())
            try:
                async for message in call:
                    slots.release()
                    result = message.result
                    if result.id in report.answers:
                        report.duplicates += 1
                    elif result.id not in expected:
                        report.unknown += 1
                    report.answers[result.id] += 1
                    name = STATUS_NAME[result.status]
                    report.statuses[name] += 1
                    report.status_of.setdefault(result.id, name)
                    if result.error:
                        report.error_of.setdefault(result.id, result.error[:500])
                    if name not in expected.get(result.id, ()):
                        report.wrong.append((result.id, name, result.error[:300]))
                    if on_progress is not None:
                        on_progress(len(report.answers))
                await sender
            except grpc.aio.AioRpcError as exc:
                report.stream_errors.append((exc.code().name, exc.details()))
            finally:
                sender.cancel()

        await asyncio.gather(*(one_stream(options, shard) for options, shard in shards if shard))
    report.seconds = time.monotonic() - started
    return report


class WorkerKiller:
    """Sends SIGKILL to a random worker process every `period` seconds."""

    def __init__(self, app: App, period: float = 1.0, seed: int = 9) -> None:
        self._app = app
        self._period = period
        self._random = random.Random(seed)
        self.kills = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._period)
            pids = worker_pids(self._app)
            if not pids:
                continue
            try:
                os.kill(self._random.choice(pids), signal.SIGKILL)
                self.kills += 1
            except ProcessLookupError:
                pass

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
