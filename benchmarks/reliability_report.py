"""Runs the reliability matrix once and prints its figures as a Markdown table.

    python benchmarks/reliability_report.py            # print the tables
    python benchmarks/reliability_report.py --write    # also refresh docs/RELIABILITY.md

Same harness as tests/reliability (loopback, stand-in REPL, server in this
process). Figures are counts, durations and memory of one run on this
machine; they are a record, not a pass/fail gate (the tests are that).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # testkit, which reliability_support imports
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

import grpc  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402

from reliability_support import (  # noqa: E402
    FAULT_MIX,
    HEADER,
    STATUS_NAME,
    WorkerKiller,
    descendants,
    fault_mix_items,
    fd_baseline,
    open_fds,
    pb,
    pb_grpc,
    rss_mb,
    run_streams,
    snippet,
    start_app,
    wait_for,
    wait_no_descendants,
)

DOC = ROOT / "docs" / "RELIABILITY.md"
BEGIN, END = "<!-- reliability-report:begin -->", "<!-- reliability-report:end -->"


def _counts(counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items()) if v) or "-"


def _stats(app):
    """The pool's counters, as it publishes them (Pool.metrics)."""
    return app.pool.metrics(memory=False).stats


def _quiet(app) -> bool:
    """Nothing queued and every submitted job finished (the pool's published metrics)."""
    metrics = app.pool.metrics(memory=False)
    return (
        metrics.snapshot.queue_depth == 0
        and metrics.stats.jobs_submitted == metrics.stats.jobs_finished
    )


async def _next_call_ok(port: int) -> str:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier"), timeout=10
        )
        code, _ = snippet("ok", 1)
        reply = await pb_grpc.VerifierStub(channel).Verify(
            pb.VerifyRequest(snippets=[pb.Snippet(id="n", code=code)]), timeout=30
        )
        return f"health {health_pb2.HealthCheckResponse.ServingStatus.Name(health.status)}, next call {STATUS_NAME[reply.results[0].status]}"


async def sustained(total: int) -> list[tuple[str, str]]:
    fds_before = await fd_baseline()
    app = await start_app(workers=2)
    rss = {}

    def on_progress(answered: int) -> None:
        if answered == total // 4:
            gc.collect()
            rss["warm"] = rss_mb()

    items = [(f"s{i}",) + snippet("sorry" if i % 10 == 0 else "ok", i) for i in range(total)]
    rss["start"] = rss_mb()
    report = await run_streams(app.port, items, streams=64, window=4, on_progress=on_progress)
    gc.collect()
    rss["end"] = rss_mb()
    fds_loaded = open_fds()
    restarts = _stats(app).restarts
    await app.stop(2.0)
    await wait_no_descendants()
    return [
        ("snippets / workers / streams", f"{total} / 2 / 64 (window 4 per stream)"),
        ("duration", f"{report.seconds:.1f} s ({total / report.seconds:.0f} snippets/s)"),
        (
            "answered once / missing / duplicate",
            f"{len(report.answers)} / {report.missing} / {report.duplicates}",
        ),
        ("statuses", _counts(report.statuses)),
        ("wrong status", str(len(report.wrong))),
        ("worker restarts", _counts(restarts)),
        (
            "server RSS start / after warm-up (25 %) / end",
            f"{rss['start']:.0f} / {rss['warm']:.0f} / {rss['end']:.0f} MB",
        ),
        ("fds before / under load / after stop", f"{fds_before} / {fds_loaded} / {open_fds()}"),
        ("child processes left", str(len(descendants()))),
    ]


async def faults(total: int) -> list[tuple[str, str]]:
    app = await start_app(
        workers=2, limits__max_worker_rss_mb=300, limits__memory_poll_s=0.05, pool__max_retries=1
    )
    killer = WorkerKiller(app, period=1.0)
    killer.start()
    report = await run_streams(
        app.port, fault_mix_items(total), streams=64, window=4, timeout_s=1.0
    )
    await killer.stop()
    after = await _next_call_ok(app.port)
    restarts = _stats(app).restarts
    await app.stop(2.0)
    await wait_no_descendants()
    rows = [
        (
            "snippets / faults injected",
            f"{total} / " + ", ".join(f"{k} {v}" for k, v in FAULT_MIX.items()),
        ),
        ("kill -9 (1 per second)", str(killer.kills)),
        ("duration", f"{report.seconds:.1f} s"),
        (
            "answered once / missing / duplicate",
            f"{len(report.answers)} / {report.missing} / {report.duplicates}",
        ),
        ("wrong status", str(len(report.wrong))),
    ]
    for kind, counter in sorted(report.by_kind().items()):
        rows.append((f"statuses of `{kind}`", _counts(counter)))
    rows += [
        ("worker restarts", _counts(restarts)),
        ("afterwards", after),
        ("child processes left", str(len(descendants()))),
    ]
    return rows


async def cancel_storm(streams: int = 50, per_stream: int = 100) -> list[tuple[str, str]]:
    app = await start_app(workers=2)
    statuses: dict[str, int] = {}
    answers = 0
    started = time.monotonic()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = pb_grpc.VerifierStub(channel)

        async def storm(k: int) -> None:
            nonlocal answers
            call = stub.VerifyStream()

            async def send() -> None:
                for i in range(per_stream):
                    body = "theorem t : True := trivial\n" + (
                        "--@standin: burn=0.02\n" if i % 2 else ""
                    )
                    await call.write(
                        pb.VerifyStreamRequest(
                            snippet=pb.Snippet(id=f"{k}-{i}", code=HEADER + body)
                        )
                    )
                    await call.write(pb.VerifyStreamRequest(cancel_id=f"{k}-{i}"))
                await call.done_writing()

            sender = asyncio.ensure_future(send())
            async for message in call:
                answers += 1
                name = STATUS_NAME[message.result.status]
                statuses[name] = statuses.get(name, 0) + 1
            await sender

        await asyncio.gather(*(storm(k) for k in range(streams)))
    seconds = time.monotonic() - started
    await wait_for(
        lambda: _quiet(app),
        20,
        "quiet",
    )
    after = await _next_call_ok(app.port)
    restarts = _stats(app).restarts
    await app.stop(2.0)
    await wait_no_descendants()
    return [
        (
            "snippets, each cancelled right after it was sent",
            f"{streams * per_stream} over {streams} streams",
        ),
        ("duration", f"{seconds:.1f} s"),
        ("answers", f"{answers} ({_counts(statuses)})"),
        ("worker restarts", _counts(restarts)),
        ("afterwards", after),
    ]


async def deadlines(count: int = 300) -> list[tuple[str, str]]:
    app = await start_app(workers=2)
    codes: dict[str, int] = {}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        stub = pb_grpc.VerifierStub(channel)
        code, _ = snippet("ok", 0)

        async def one() -> None:
            try:
                await stub.Verify(
                    pb.VerifyRequest(snippets=[pb.Snippet(id="d", code=code)]), timeout=0.001
                )
                name = "OK"
            except grpc.aio.AioRpcError as exc:
                name = exc.code().name
            codes[name] = codes.get(name, 0) + 1

        await asyncio.gather(*(one() for _ in range(count)))
    await wait_for(lambda: _quiet(app), 20, "quiet")
    after = await _next_call_ok(app.port)
    await app.stop(2.0)
    await wait_no_descendants()
    return [
        ("unary calls with a 1 ms deadline", f"{count}: {_counts(codes)}"),
        ("afterwards", after),
    ]


async def shutdown() -> list[tuple[str, str]]:
    app = await start_app(workers=2)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = pb_grpc.VerifierStub(channel)
    calls = []
    for k in range(4):
        call = stub.VerifyStream()
        for i in range(6):
            body = f"theorem t{k}_{i} : True := trivial\n--@standin: burn=0.15\n"
            await call.write(
                pb.VerifyStreamRequest(snippet=pb.Snippet(id=f"{k}-{i}", code=HEADER + body))
            )
        await call.done_writing()
        calls.append(call)

    async def drain(call):
        out = [STATUS_NAME[m.result.status] async for m in call]
        return out, (await call.code()).name

    drains = [asyncio.ensure_future(drain(c)) for c in calls]
    await wait_for(lambda: _stats(app).jobs_finished >= 2, 60, "load")
    # As a balancer does (and tests/reliability/test_graceful_shutdown.py): the new call
    # comes once health says NOT_SERVING. A call racing the stop's first step may get
    # CANCELLED from gRPC itself instead (grpc/grpc#41785: calls accepted but not yet
    # handed to a handler are cancelled at shutdown), which this row would then show.
    watch = health_pb2_grpc.HealthStub(channel).Watch(
        health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier")
    )
    await watch.read()  # SERVING
    started = time.monotonic()
    stopping = asyncio.ensure_future(app.stop(grace=60.0))
    await watch.read()  # NOT_SERVING
    watch.cancel()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as fresh:
        try:
            await pb_grpc.VerifierStub(fresh).Verify(
                pb.VerifyRequest(snippets=[pb.Snippet(id="x", code=snippet("ok", 0)[0])]),
                timeout=10,
            )
            new_call = "OK"
        except grpc.aio.AioRpcError as exc:
            new_call = exc.code().name
    results = await asyncio.gather(*drains)
    await stopping
    seconds = time.monotonic() - started
    await channel.close()
    statuses: dict[str, int] = {}
    for answers, _code in results:
        for s in answers:
            statuses[s] = statuses.get(s, 0) + 1
    await wait_no_descendants()
    return [
        ("in flight at stop (burn 0.15 s each)", "24 on 4 streams"),
        (
            "their answers / stream status",
            f"{_counts(statuses)} / " + ", ".join(sorted({c for _a, c in results})),
        ),
        ("new call during the grace period", new_call),
        ("stop duration (grace 60 s)", f"{seconds:.1f} s"),
        ("child processes left", str(len(descendants()))),
    ]


def _table(title: str, rows: list[tuple[str, str]]) -> str:
    lines = [f"#### {title}", "", "| figure | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines) + "\n"


async def main(total: int) -> str:
    sections = [
        (f"Sustained load ({total} snippets)", await sustained(total)),
        (f"Faults under load ({total} snippets)", await faults(total)),
        ("Cancellation storm", await cancel_storm()),
        ("Deadline 1 ms", await deadlines()),
        ("Graceful shutdown under load", await shutdown()),
    ]
    head = (
        f"Run: `python benchmarks/reliability_report.py --write`, {time.strftime('%Y-%m-%d')}, "
        f"Python {platform.python_version()}, stand-in REPL, loopback, {len(__import__('os').sched_getaffinity(0))} cores.\n\n"
    )
    return head + "\n".join(_table(t, rows) for t, rows in sections)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--snippets", type=int, default=20_000)
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"replace the generated section of {DOC.relative_to(ROOT)}",
    )
    args = parser.parse_args()
    text = asyncio.run(main(args.snippets))
    print(text)
    if args.write:
        doc = DOC.read_text()
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        DOC.write_text(doc[:start] + "\n" + text + doc[end:])
