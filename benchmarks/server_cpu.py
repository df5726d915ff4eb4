"""The server's own CPU per request, counted over a fixed number of requests (issue 28 item 1).

    python -m benchmarks.server_cpu --requests 400 --rpc unary --checks off
    python -m benchmarks.server_cpu --requests 400 --rpc stream --py-spy benchmarks/out/spy.txt
    python -m benchmarks.profile_share benchmarks/out/spy.txt
    python -m benchmarks.server_cpu --requests 320 --rpc batch --batch 16 --checks default \
        --cprofile benchmarks/out/serve.prof    # then: python -m pstats benchmarks/out/serve.prof
    python -m benchmarks.server_cpu --requests 160 --rpc batch --batch 16 --waiting 20
    python -m benchmarks.server_cpu --requests 640 --rpc batch --batch 16 --checks default --pin

One `leanrpc serve` subprocess on the stand-in REPL (result cache off, `--workers` workers),
a warm-up, then the server process's CPU (user + system, its REPLs not counted) is read
before and after `--requests` miniF2F snippets sent with `--concurrency` in flight, as unary
`Verify` calls of one snippet, `Verify` calls of `--batch` snippets (`--rpc batch`: a GRPO
group sent at once), or over one `VerifyStream`. The idle rate (server CPU per second with nothing
to do, over `--idle` seconds) is printed apart, so a reader can tell the per-request cost from
timers; so is, with `--waiting S`, the rate while every worker holds one command that answers
nothing for S seconds (the memory watch polls busy workers: a cost per second, which the
figure per request pays in proportion to how long each request keeps a worker busy).
`--scale` is the stand-in's elaboration cost scale (default: the load harness's, so
the figure is the one `benchmarks.load compare` reports; a smaller scale runs faster, with
more answers per wakeup and so a lower figure). CPU time, not wall time: less sensitive to
other load on the machine than throughput, not immune to it (cache misses, fewer answers per
wakeup when the REPLs are starved). `--py-spy FILE` attaches `py-spy record --native` to the
server for the measured requests only (no start-up, no warm-up; py-spy comes with
`pip install -e ".[bench]"`); `--cprofile FILE` runs the
server under cProfile (benchmarks.cprofile_serve: where py-spy is missing), switched on after
the warm-up and written after the last round. The driver's channel sends no HTTP/2 BDP
probes, as leanrpc_client's does not (each probe is a PING the server's gRPC threads answer);
`--client-bdp-probe` gives gRPC's default, a client that probes.
May import: benchmarks.targets.common, benchmarks.workloads, benchmarks.reference_bench
(`--pin`), leanrpc.v1, grpc, psutil.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from . import workloads
from .targets.common import apply_settings, leanrpc_table, serve_leanrpc, stop_process, wait_port


def measured_table(workers: int, checks: str, scale: float) -> dict:
    """The measured `leanrpc serve` (targets.common.leanrpc_table: the stand-in at `scale`,
    `workers` warm workers, no result cache, `checks` "off" as in the rows compared with
    peers), without the system-memory guard."""
    table = leanrpc_table(workers, scale, checks)
    table["limits"] = {"max_system_memory_percent": 0}
    return table


def cpu_seconds(process: psutil.Process) -> float:
    """The process's own CPU (user + system), its children not counted."""
    t = process.cpu_times()
    return t.user + t.system


def main_thread_seconds(process: psutil.Process) -> float:
    """The CPU of the process's main thread (the event loop's: all of leanrpc's Python), so the
    rest of the process's CPU is gRPC's own threads and the interpreter's."""
    for thread in process.threads():
        if thread.id == process.pid:
            return thread.user_time + thread.system_time
    return 0.0


def main_thread_sleeps(pid: int) -> int:
    """How many times the main thread went to sleep and was woken (its voluntary context
    switches): each answer, timer or call it waits for after a pause is one, and each
    costs CPU before any work is done (benchmarks/wake_cost.py)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


async def drive(
    port: int,
    codes: list[str],
    rpc: str,
    concurrency: int,
    batch: int = 8,
    references: dict[str, str] | None = None,
    bdp_probe: bool = False,
) -> int:
    """Sends `codes` over `concurrency` lanes: one unary Verify per snippet ("unary"), Verify
    calls of `batch` snippets ("batch"), or one VerifyStream with as many in flight ("stream");
    each pinned to `references[code]` where given; returns how many were VALID (and, when
    pinned, passed their reference check)."""
    import grpc

    from leanrpc.v1 import verifier_pb2 as pb
    from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

    # As leanrpc_client's channel: no HTTP/2 BDP probing unless `bdp_probe` (gRPC's default).
    channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", int(bdp_probe))]
    )
    stub = pb_grpc.VerifierStub(channel)
    options = pb.VerifyOptions(reuse=True)
    references = references or {}

    def snippet(n: int, code: str):
        return pb.Snippet(id=str(n), code=code, reference=references.get(code, ""))

    def ok(result, code: str) -> bool:
        pinned = bool(references.get(code))
        return result.status == pb.STATUS_VALID and (not pinned or result.reference.passed)

    valid = 0
    try:
        if rpc == "stream":
            call = stub.VerifyStream()
            await call.write(pb.VerifyStreamRequest(options=options))
            window = asyncio.Semaphore(concurrency)

            async def send() -> None:
                for n, code in enumerate(codes):
                    await window.acquire()
                    await call.write(pb.VerifyStreamRequest(snippet=snippet(n, code)))
                await call.done_writing()

            sender = asyncio.ensure_future(send())
            async for response in call:
                window.release()
                valid += ok(response.result, codes[int(response.result.id)])
            await sender
        else:
            queue = list(enumerate(codes))[::-1]

            size = batch if rpc == "batch" else 1

            async def lane() -> None:
                nonlocal valid
                while queue:
                    taken = [queue.pop() for _ in range(min(size, len(queue)))]
                    response = await stub.Verify(
                        pb.VerifyRequest(
                            snippets=[snippet(n, code) for n, code in taken],
                            options=options,
                        ),
                        timeout=120,
                    )
                    valid += sum(ok(r, code) for r, (_n, code) in zip(response.results, taken))

            await asyncio.gather(*(lane() for _ in range(concurrency)))
    finally:
        await channel.close()
    return valid


async def waiting_cpu(
    port: int, process: psutil.Process, workers: int, seconds: float
) -> tuple[float, int]:
    """Server CPU per second (ms) while each of `workers` workers holds one command that
    answers nothing for longer than `seconds` (a stand-in burn): what watching busy
    workers costs with no answer to read (the memory watch's polls, issue 38 item 6);
    and how many held calls were answered before the window closed (0 when it measured
    what it says). The held calls are cancelled afterwards (their workers are replaced)."""
    import grpc

    from leanrpc.v1 import verifier_pb2 as pb
    from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

    code = f"theorem t : True := by\n  trivial\n--@standin: burn={seconds + 10:g}\n"
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.VerifierStub(channel)
    options = pb.VerifyOptions()
    options.timeout.FromSeconds(int(seconds) + 60)
    calls = [
        asyncio.ensure_future(
            stub.Verify(
                pb.VerifyRequest(snippets=[pb.Snippet(id=f"hold-{n}", code=code)], options=options)
            )
        )
        for n in range(workers)
    ]
    try:
        await asyncio.sleep(2.0)  # every held command reached its worker
        cpu0 = cpu_seconds(process)
        await asyncio.sleep(seconds)
        cpu = cpu_seconds(process) - cpu0
        return 1000 * cpu / seconds, sum(call.done() for call in calls)
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await channel.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--rpc",
        choices=("unary", "stream", "batch"),
        default="unary",
        help="batch: Verify calls of --batch snippets each (a GRPO group at once)",
    )
    parser.add_argument("--batch", type=int, default=8, help="snippets per call with --rpc batch")
    parser.add_argument(
        "--checks",
        choices=("off", "default"),
        default="off",
        help="off: no axiom check, code policy `trusted` (the rows compared with peers)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin each snippet to its own statement (Snippet.reference: the proof cut at its last "
        "theorem's `:= by`, closed with `sorry`), as the reward door does by default; every "
        "reference is elaborated once in the warm-up, so the rounds read its cached answers",
    )
    parser.add_argument("--workload", default="minif2f")
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--idle", type=float, default=3.0, help="seconds of idle CPU measured (0: none)"
    )
    parser.add_argument(
        "--waiting",
        type=float,
        default=0.0,
        help="seconds of server CPU measured, after the rounds, while each worker holds one "
        "command that answers nothing meanwhile (the memory watch's polls; 0: none)",
    )
    parser.add_argument(
        "--py-spy", default="", metavar="FILE", help="py-spy raw profile of the measured rounds"
    )
    parser.add_argument(
        "--cprofile",
        type=Path,
        metavar="FILE",
        help="cProfile stats of the measured rounds (benchmarks.cprofile_serve)",
    )
    parser.add_argument(
        "--client-bdp-probe",
        action="store_true",
        help="the driver's channel probes HTTP/2 BDP (gRPC's default; leanrpc_client does not)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a server setting, e.g. repl.fence_audit=off (JSON values: numbers, true/false)",
    )
    args = parser.parse_args(argv)
    for name in ("requests", "workers", "concurrency", "rounds", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    py_spy = None
    if args.py_spy:
        beside = Path(sys.executable).with_name("py-spy")  # the venv's, when not activated
        py_spy = shutil.which("py-spy") or (str(beside) if beside.exists() else None)
        if py_spy is None:
            parser.error("--py-spy needs py-spy on PATH or in this venv (pip install py-spy)")
    try:
        items = workloads.load(args.workload, scale=args.scale)  # none: stops with one line
    except workloads.SharedNotFound as exc:
        workloads.no_data(str(exc))
    codes = [items[k % len(items)].code for k in range(args.requests)]
    lanes = (args.rpc, args.concurrency, args.batch)  # how drive() sends them
    tmp = Path(tempfile.mkdtemp(prefix="bench-server-cpu-"))
    table = measured_table(args.workers, args.checks, args.scale)
    apply_settings(table, args.set)  # e.g. repl.fence_audit=off, limits.max_worker_rss_mb=-1
    wrapper = ("-m", "benchmarks.cprofile_serve", str(args.cprofile)) if args.cprofile else ()
    if args.cprofile:
        args.cprofile.unlink(missing_ok=True)
    server, port = serve_leanrpc(table, tmp, wrapper)
    spy = None
    rows = []
    waiting_ms_per_s = None
    waiting_answered = None
    try:
        asyncio.run(wait_port(port, server, 60, "leanrpc serve"))
        process = psutil.Process(server.pid)
        references = None
        warm = codes[: 4 * args.concurrency]
        if args.pin:
            from .reference_bench import pinned_statement

            warm = list(dict.fromkeys(codes))  # every reference elaborated (and cached) once
            references = {code: pinned_statement(code) or "" for code in warm}
        asyncio.run(drive(port, warm, *lanes, references, args.client_bdp_probe))  # warm-up
        idle_ms_per_s = None
        if args.idle > 0:
            cpu0 = cpu_seconds(process)
            time.sleep(args.idle)
            idle_ms_per_s = 1000 * (cpu_seconds(process) - cpu0) / args.idle
        if args.py_spy:
            spy = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--native",
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "-o",
                    args.py_spy,
                    "--pid",
                    str(server.pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        if args.cprofile:
            server.send_signal(signal.SIGUSR1)
            time.sleep(0.2)
        for n in range(args.rounds):
            load = os.getloadavg()[0]
            cpu0, t0 = cpu_seconds(process), time.perf_counter()
            main0 = main_thread_seconds(process)
            sleeps0 = main_thread_sleeps(server.pid)
            valid = asyncio.run(drive(port, codes, *lanes, references, args.client_bdp_probe))
            cpu, wall = cpu_seconds(process) - cpu0, time.perf_counter() - t0
            main_cpu = main_thread_seconds(process) - main0
            sleeps = main_thread_sleeps(server.pid) - sleeps0
            rows.append(
                {
                    "round": n + 1,
                    "rpc": args.rpc,
                    "batch": args.batch if args.rpc == "batch" else 1,
                    "checks": args.checks,
                    "pinned": sum(bool((references or {}).get(code)) for code in codes),
                    "requests": len(codes),
                    "valid": valid,
                    "wall_s": round(wall, 2),
                    "req_per_s": round(len(codes) / wall, 1),
                    "server_cpu_ms_per_request": round(1000 * cpu / len(codes), 3),
                    "main_thread_ms_per_request": round(1000 * main_cpu / len(codes), 3),
                    "wakeups_per_request": round(sleeps / len(codes), 2),
                    "loadavg_at_start": round(load, 2),
                }
            )
        if args.waiting > 0:
            waiting_ms_per_s, waiting_answered = asyncio.run(
                waiting_cpu(port, process, args.workers, args.waiting)
            )
        if args.cprofile:
            server.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not args.cprofile.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
        stop_process(server)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"# server_cpu: {args.workload}, {args.requests} requests per round, {args.rpc}"
        + (f" of {args.batch}" if args.rpc == "batch" else "")
        + ", "
        f"checks {args.checks}{' and each snippet pinned to its statement' if args.pin else ''}, "
        f"{args.workers} workers, {args.concurrency} in flight, scale {args.scale:g}; "
        + (
            f"idle server CPU {idle_ms_per_s:.2f} ms/s"
            if idle_ms_per_s is not None
            else "idle not measured"
        )
    )
    if waiting_ms_per_s is not None:
        print(
            f"# waiting: {waiting_ms_per_s:.2f} ms/s of server CPU while each of the "
            f"{args.workers} workers held one command for {args.waiting:g} s"
            + (f" ({waiting_answered} answered meanwhile)" if waiting_answered else "")
        )
    print(
        "| round | requests | valid | wall s | req/s | server CPU ms/request "
        "| of it, main thread | its wakeups per request | load avg |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['round']} | {r['requests']} | {r['valid']} | {r['wall_s']} | {r['req_per_s']} | "
            f"{r['server_cpu_ms_per_request']} | {r['main_thread_ms_per_request']} | "
            f"{r['wakeups_per_request']} | {r['loadavg_at_start']} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "idle_ms_per_s": idle_ms_per_s,
                    "waiting_ms_per_s": waiting_ms_per_s,
                    "waiting_answered": waiting_answered,
                    "rounds": rows,
                },
                indent=1,
            )
        )
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
