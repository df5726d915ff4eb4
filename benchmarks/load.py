"""Load generator for leanrpc and its peers (Kimina Lean Server, LeanInteract).

    python -m benchmarks.load run --workers 2 --duration 30             # one leanrpc run
    python -m benchmarks.load run --target kimina --workers 2 --requests 300
    python -m benchmarks.load scaling --duration 30                     # matrix + PNG plots
    python -m benchmarks.load compare --rounds 2 --duration 40          # side by side, alternating

Each run starts its own server (leanrpc, or a peer from benchmarks/.peers-venv) on loopback with
the REPL stand-in (`python -m leanrpc.standin`, never real Lean) as its REPL, warms it up, drives
it open-loop (Poisson arrivals at --rate) or closed-loop (--concurrency requests always in
flight) for --duration seconds or --requests requests, and reports one JSON document (schema
`leanrpc-bench/1`, see `SUMMARY_KEYS`) plus a table. Progress goes to stderr once a second.

Definitions used in every report:

* latency: client send to answer, queueing and any import included;
* repl time: the REPL round trip the server itself measured (leanrpc: boot_s + header_s + body_s;
  Kimina: the `time` field, body only); overhead = latency - queue_s - repl time, per request
  (queue_s is leanrpc-only; for peers, overhead also contains their queueing);
* ideal throughput: workers / mean simulated REPL cost (the workload's burn seconds); the
  ratio to it is the share of the REPL capacity the whole stack delivers.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from . import workloads

SCHEMA = "leanrpc-bench/1"
SUMMARY_KEYS = (
    "schema", "target", "config", "machine", "started_at", "requests", "statuses", "errors",
    "duration_s", "throughput_rps", "latency_ms", "repl_ms", "overhead_ms", "server_internal_ms", "ideal_rps",
    "ratio_to_ideal", "server",
)
REPO = Path(__file__).resolve().parents[1]
PEERS_VENV = REPO / "benchmarks" / ".peers-venv"
SHIM_DIR = REPO / "benchmarks" / "peers" / "shim"


@dataclasses.dataclass
class RunConfig:
    target: str = "leanrpc"  # leanrpc | kimina | leaninteract
    rpc: str = "unary"  # unary | stream (leanrpc only)
    mode: str = "closed"  # closed | open
    concurrency: int = 0  # closed loop; 0 = 2 x workers
    rate: float = 0.0  # open loop, requests/s
    duration_s: float = 0.0
    requests: int = 0
    workers: int = 2
    workload: str = "kimina"
    scale: float = workloads.DEFAULT_SCALE
    limit: int = 0
    reuse: bool = True
    pure_python: bool = False  # LEANRPC_NO_EXTENSIONS=1 on the server
    warmup: int = -1  # requests before measuring; -1 = 2 x workers
    seed: int = 1
    timeout_s: float = 120.0
    progress: bool = True

    def validate(self) -> None:
        if self.target not in ("leanrpc", "kimina", "leaninteract"):
            raise SystemExit(f"unknown target {self.target!r}")
        if self.rpc not in ("unary", "stream"):
            raise SystemExit(f"unknown --rpc {self.rpc!r}")
        if self.mode not in ("closed", "open"):
            raise SystemExit(f"unknown --mode {self.mode!r}")
        if self.mode == "open" and self.rate <= 0:
            raise SystemExit("open loop needs --rate > 0")
        if self.target == "leaninteract" and self.mode != "closed":
            raise SystemExit("leaninteract is a library: closed loop only")
        if not self.duration_s and not self.requests:
            raise SystemExit("give --duration or --requests")
        if self.workers < 1:
            raise SystemExit("--workers must be >= 1")


@dataclasses.dataclass
class Record:
    id: str
    start: float
    end: float
    status: str  # VALID/INVALID/... or an error like "grpc:UNAVAILABLE", "http:429"
    burn_s: float
    repl_s: float | None = None
    queue_s: float | None = None
    verifier: str = ""
    server_total_s: float | None = None  # leanrpc: arrival to answer, inside the server


# ---------------------------------------------------------------------------------------------
# helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def distribution_ms(values: list[float]) -> dict:
    ordered = sorted(v * 1000.0 for v in values)
    if not ordered:  # e.g. LeanInteract reports no REPL time: keep the keys, no numbers
        return {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {
        "n": len(ordered),
        "mean": round(statistics.fmean(ordered), 3),
        "p50": round(percentile(ordered, 0.50), 3),
        "p90": round(percentile(ordered, 0.90), 3),
        "p99": round(percentile(ordered, 0.99), 3),
        "max": round(ordered[-1], 3),
    }


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class ResourceWatch:
    """CPU seconds and peak RSS of a server process and, separately, of its REPL children."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.rss_max = 0
        self.repl_rss_max = 0
        self.children_cpu_by_pid: dict[int, float] = {}
        self._task: asyncio.Task | None = None
        self.cpu0 = self.server_cpu()
        self.repl_cpu0 = self.children_cpu()
        self.t0 = time.monotonic()

    def server_cpu(self) -> float:
        t = self.process.cpu_times()
        return t.user + t.system

    def children_cpu(self) -> float:
        try:
            children = self.process.children(recursive=True)
        except psutil.Error:
            return sum(self.children_cpu_by_pid.values())
        rss = 0
        for child in children:
            try:
                t = child.cpu_times()
                self.children_cpu_by_pid[child.pid] = t.user + t.system
                rss += child.memory_info().rss
            except psutil.Error:
                pass
        self.repl_rss_max = max(self.repl_rss_max, rss)
        # Children that exited keep their last sample (a recycled worker's CPU still counts).
        return sum(self.children_cpu_by_pid.values())

    def sample(self) -> None:
        try:
            self.rss_max = max(self.rss_max, self.process.memory_info().rss)
        except psutil.Error:
            pass
        self.children_cpu()

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.5)

    def start(self) -> None:
        self.cpu0 = self.server_cpu()
        self.repl_cpu0 = self.children_cpu()
        self.t0 = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> dict:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.sample()
        wall = max(1e-9, time.monotonic() - self.t0)
        cpu = self.server_cpu() - self.cpu0
        repl_cpu = self.children_cpu() - self.repl_cpu0
        return {
            "pid": self.process.pid,
            "cpu_s": round(cpu, 3),
            "cpu_percent": round(100.0 * cpu / wall, 1),
            "rss_mb_max": round(self.rss_max / 2**20, 1),
            "repl_cpu_s": round(repl_cpu, 3),
            "repl_rss_mb_max": round(self.repl_rss_max / 2**20, 1),
        }


def _standin_args(cfg: RunConfig) -> list[str]:
    return ["--import-cost", f"{workloads.import_cost(cfg.scale):.4f}",
            "--reimport-cost", f"{workloads.import_cost(cfg.scale) / 4:.4f}"]


async def _wait_port(port: int, process: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


def _stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# ---------------------------------------------------------------------------------------------
# targets: start a server, send one item, stop


class LeanrpcTarget:
    name = "leanrpc"

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        self.cfg = cfg
        self.tmp = tmp
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self._stream = None
        self._pending: dict[str, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._write_lock = asyncio.Lock()  # grpc.aio allows one pending write per stream

    async def start(self) -> int:
        from leanrpc.v1 import verifier_pb2 as pb
        from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
        import grpc

        self.pb = pb
        command = [sys.executable, "-m", "leanrpc.standin", *_standin_args(self.cfg)]
        config = self.tmp / "leanrpc.toml"
        config.write_text(
            "[repl]\ncommand = " + json.dumps(command) + "\n"
            f"[pool]\nworkers = {self.cfg.workers}\nmin_warm = {self.cfg.workers}\n"
            f"default_timeout_s = {self.cfg.timeout_s}\n"
        )
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        if self.cfg.pure_python:
            env["LEANRPC_NO_EXTENSIONS"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "leanrpc.cli", "serve", "--config", str(config), "--port", str(self.port)],
            env=env, stdout=subprocess.DEVNULL, stderr=open(self.tmp / "server.log", "wb"),
        )
        await _wait_port(self.port, self.process, 60, "leanrpc server")
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{self.port}",
            options=[("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)],
        )
        self.stub = pb_grpc.VerifierStub(self.channel)
        info = await self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=30)
        self.info = {"verifier": info.verifier.kind, "native_core": info.native_core, "workers": info.workers}
        # Round trip of a trivial RPC: the client + gRPC transport floor inside every overhead figure.
        floor = []
        for _ in range(50):
            t0 = time.monotonic()
            await self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=30)
            floor.append(time.monotonic() - t0)
        self.info["rpc_floor_ms"] = distribution_ms(floor)
        if info.verifier.kind != "stand-in":
            raise RuntimeError(f"expected the stand-in REPL, server reports {info.verifier.kind!r}")
        self.options = pb.VerifyOptions(timeout_s=self.cfg.timeout_s, reuse=self.cfg.reuse)
        if self.cfg.rpc == "stream":
            self._stream = self.stub.VerifyStream()
            await self._stream.write(pb.VerifyStreamRequest(options=self.options))
            self._reader = asyncio.get_running_loop().create_task(self._read_stream())
        return self.process.pid

    async def _read_stream(self) -> None:
        try:
            async for response in self._stream:
                future = self._pending.pop(response.result.id, None)
                if future is not None and not future.done():
                    future.set_result(response.result)
        except Exception as exc:  # the stream broke: fail everything still waiting
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(exc)
            self._pending.clear()

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        import grpc

        pb = self.pb
        start = time.monotonic()
        try:
            if self._stream is not None:
                future = asyncio.get_running_loop().create_future()
                self._pending[request_id] = future
                async with self._write_lock:
                    await self._stream.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id=request_id, code=item.code)))
                result = await future
            else:
                response = await self.stub.Verify(
                    pb.VerifyRequest(snippets=[pb.Snippet(id=request_id, code=item.code)], options=self.options),
                    timeout=self.cfg.timeout_s + 30,
                )
                result = response.results[0]
        except grpc.aio.AioRpcError as exc:
            return Record(request_id, start, time.monotonic(), f"grpc:{exc.code().name}", item.burn_s)
        end = time.monotonic()
        t = result.timings
        return Record(
            request_id, start, end, pb.Status.Name(result.status), item.burn_s,
            repl_s=t.boot_s + t.header_s + t.body_s, queue_s=t.queue_s, verifier=result.verifier.kind,
            server_total_s=t.total_s,
        )

    async def stop(self) -> None:
        if self._stream is not None:
            await self._stream.done_writing()
            if self._reader:
                try:
                    await asyncio.wait_for(self._reader, 10)
                except (asyncio.TimeoutError, Exception):
                    self._reader.cancel()
        if getattr(self, "channel", None) is not None:
            await self.channel.close()
        if self.process:
            _stop_process(self.process)


class _HttpConnection:
    """Minimal HTTP/1.1 keep-alive JSON client (the bench must not add a core dependency)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader = self.writer = None

    async def post(self, path: str, payload: dict, timeout: float) -> tuple[int, dict | None]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        body = json.dumps(payload).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        try:
            self.writer.write(head + body)
            return await asyncio.wait_for(self._read_response(), timeout)
        except Exception:
            self.close()
            raise

    async def _read_response(self) -> tuple[int, dict | None]:
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        code = int(status_line.split()[1])
        length, chunked, close = 0, False, False
        while True:
            line = (await self.reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and "close" in value.lower():
                close = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data += await self.reader.readexactly(size)
                await self.reader.readline()
        else:
            data = await self.reader.readexactly(length)
        if close:
            self.close()
        try:
            return code, json.loads(data) if data else None
        except ValueError:
            return code, None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class KiminaTarget:
    """kimina-ast-server (Kimina Lean Server v2 derivative) from benchmarks/.peers-venv."""

    name = "kimina"

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        self.cfg = cfg
        self.tmp = tmp
        self.port = free_port()
        self.process = None
        self._idle: list[_HttpConnection] = []

    async def start(self) -> int:
        exe = PEERS_VENV / "bin" / "kimina-ast-server"
        if not exe.exists():
            raise RuntimeError(f"{exe} missing: run benchmarks/peers/setup.sh")
        project = self.tmp / "kimina-project"
        project.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update({
            "PATH": f"{SHIM_DIR}:{env.get('PATH', '')}",  # `lake env X` -> exec X
            "PYTHONPATH": str(REPO / "benchmarks" / "peers" / "prisma_stub"),
            "LEANRPC_PYTHON": sys.executable,
            "LEANRPC_STANDIN_ARGS": " ".join(_standin_args(self.cfg)),
            "LEAN_SERVER_REPL_PATH": str(SHIM_DIR / "standin-repl"),
            "LEAN_SERVER_PROJECT_DIR": str(project),
            "LEAN_SERVER_SKIP_VALIDATION": "1",
            "LEAN_SERVER_HOST": "127.0.0.1",
            "LEAN_SERVER_PORT": str(self.port),
            "LEAN_SERVER_MAX_REPLS": str(self.cfg.workers),
            # Production settings: dev mode logs every snippet with syntax highlighting.
            "LEAN_SERVER_ENVIRONMENT": "prod",
            "LEAN_SERVER_LOG_LEVEL": "WARNING",
        })
        self.process = subprocess.Popen(
            [str(exe)], env=env, cwd=self.tmp, stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "kimina.log", "wb"),
        )
        await _wait_port(self.port, self.process, 90, "kimina-ast-server")
        self.info = {"verifier": "stand-in", "max_repls": self.cfg.workers}
        return self.process.pid

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        connection = self._idle.pop() if self._idle else _HttpConnection(self.port)
        start = time.monotonic()
        payload = {"snippets": [{"id": request_id, "code": item.code}],
                   "timeout": int(self.cfg.timeout_s), "reuse": self.cfg.reuse}
        try:
            code, body = await connection.post("/api/check", payload, self.cfg.timeout_s + 30)
        except Exception as exc:
            return Record(request_id, start, time.monotonic(), f"http:{type(exc).__name__}", item.burn_s)
        end = time.monotonic()
        self._idle.append(connection)
        if code != 200 or not body or not body.get("results"):
            return Record(request_id, start, end, f"http:{code}", item.burn_s)
        result = body["results"][0]
        response = result.get("response")
        if result.get("error"):
            status = "TIMEOUT" if "timed out" in result["error"] else "REJECTED"
        elif not isinstance(response, dict) or "message" in response and "messages" not in response:
            status = "REJECTED"
        else:
            status = workloads.classify(response.get("messages"), response.get("sorries"))
        return Record(request_id, start, end, status, item.burn_s, repl_s=result.get("time"), verifier="stand-in")

    async def stop(self) -> None:
        for connection in self._idle:
            connection.close()
        if self.process:
            _stop_process(self.process)


# ---------------------------------------------------------------------------------------------
# drivers


class Progress:
    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.label = label
        self.done = 0
        self.errors = 0
        self.sent = 0
        self.t0 = time.monotonic()

    async def loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.print()

    def print(self) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.t0
        rate = self.done / elapsed if elapsed else 0.0
        print(f"\r[{self.label}] {elapsed:6.1f}s sent {self.sent} done {self.done} "
              f"in-flight {self.sent - self.done} errors {self.errors} {rate:7.1f} req/s",
              end="", file=sys.stderr, flush=True)


async def drive(target, items: list[workloads.Item], cfg: RunConfig, progress: Progress,
                prefix: str, limit_requests: int, duration_s: float) -> tuple[list[Record], int]:
    """Sends requests in closed or open loop; returns (records, number sent)."""
    records: list[Record] = []
    counter = 0
    deadline = time.monotonic() + duration_s if duration_s else float("inf")

    def next_item() -> tuple[workloads.Item, str] | None:
        nonlocal counter
        if limit_requests and counter >= limit_requests:
            return None
        if time.monotonic() >= deadline:
            return None
        item = items[counter % len(items)]
        request_id = f"{prefix}{counter}"
        counter += 1
        progress.sent += 1
        return item, request_id

    async def one(item, request_id) -> None:
        try:
            record = await target.send(item, request_id)
        except Exception as exc:  # a driver bug must still count the request
            record = Record(request_id, 0.0, 0.0, f"client:{type(exc).__name__}", item.burn_s)
        records.append(record)
        progress.done += 1
        if record.status.count(":"):
            progress.errors += 1

    if cfg.mode == "closed":
        concurrency = cfg.concurrency or 2 * cfg.workers

        async def lane() -> None:
            while (nxt := next_item()) is not None:
                await one(*nxt)

        await asyncio.gather(*(lane() for _ in range(concurrency)))
    else:
        rng = random.Random(cfg.seed)
        tasks: set[asyncio.Task] = set()
        next_at = time.monotonic()
        while (nxt := next_item()) is not None:
            task = asyncio.get_running_loop().create_task(one(*nxt))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            next_at += rng.expovariate(cfg.rate)
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        if tasks:
            await asyncio.gather(*tasks)
    return records, counter


def summarize(cfg: RunConfig, target_name: str, info: dict, records: list[Record], sent: int,
              elapsed: float, server: dict, started_at: str) -> dict:
    statuses: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in records:
        bucket = errors if ":" in r.status else statuses
        bucket[r.status] = bucket.get(r.status, 0) + 1
    answered = [r for r in records if ":" not in r.status]
    latencies = [r.end - r.start for r in answered]
    repl = [r.repl_s for r in answered if r.repl_s is not None]
    overhead = [r.end - r.start - (r.queue_s or 0.0) - r.repl_s for r in answered if r.repl_s is not None]
    internal = [r.server_total_s - (r.queue_s or 0.0) - r.repl_s for r in answered
                if r.server_total_s is not None and r.repl_s is not None]
    burns = [r.burn_s for r in records]
    mean_burn = statistics.fmean(burns) if burns else 0.0
    ideal = cfg.workers / mean_burn if mean_burn else 0.0
    throughput = len(answered) / elapsed if elapsed else 0.0
    # Share of `workers` cores the REPLs actually got: on a shared machine this, not the server,
    # usually bounds ratio_to_ideal.
    # repl_busy_share: time the REPLs spent on requests (as the server measured it) over the
    # time available; near 1 means the stack keeps its REPLs fed.
    capacity = cfg.workers * elapsed
    server = {
        **server,
        "repl_cpu_share": round(server["repl_cpu_s"] / capacity, 3) if capacity else 0.0,
        "repl_busy_share": round(sum(repl) / capacity, 3) if capacity and repl else None,
    }
    return {
        "schema": SCHEMA,
        "target": target_name,
        "config": {**dataclasses.asdict(cfg), "concurrency": cfg.concurrency or 2 * cfg.workers, "server_info": info},
        "machine": machine(),
        "started_at": started_at,
        "requests": {"sent": sent, "recorded": len(records), "answered": len(answered),
                     "failed": len(records) - len(answered), "lost": sent - len(records)},
        "statuses": dict(sorted(statuses.items())),
        "errors": dict(sorted(errors.items())),
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(throughput, 3),
        "latency_ms": distribution_ms(latencies),
        "repl_ms": distribution_ms(repl),
        "overhead_ms": distribution_ms(overhead),
        "server_internal_ms": distribution_ms(internal),
        "ideal_rps": round(ideal, 3),
        "ratio_to_ideal": round(throughput / ideal, 4) if ideal else 0.0,
        "server": server,
    }


def _make_target(cfg: RunConfig, tmp: Path):
    if cfg.target == "leanrpc":
        return LeanrpcTarget(cfg, tmp)
    if cfg.target == "kimina":
        return KiminaTarget(cfg, tmp)
    raise SystemExit("leaninteract runs through run_leaninteract()")


async def run_async(cfg: RunConfig, items: list[workloads.Item] | None = None) -> dict:
    cfg.validate()
    if cfg.target == "leaninteract":
        return await asyncio.to_thread(run_leaninteract, cfg, items)
    items = items if items is not None else workloads.load(cfg.workload, scale=cfg.scale, limit=cfg.limit)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{cfg.target}-"))
    target = _make_target(cfg, tmp)
    label = f"{cfg.target}{'/' + cfg.rpc if cfg.target == 'leanrpc' else ''} w={cfg.workers}"
    try:
        pid = await target.start()
        warmup = cfg.warmup if cfg.warmup >= 0 else 2 * cfg.workers
        if warmup:
            warm_cfg = dataclasses.replace(cfg, mode="closed", concurrency=cfg.workers)
            await drive(target, items, warm_cfg, Progress(False, label), "warm-", warmup, 0)
        watch = ResourceWatch(pid)
        progress = Progress(cfg.progress, label)
        ticker = asyncio.get_running_loop().create_task(progress.loop())
        watch.start()
        t0 = time.monotonic()
        records, sent = await drive(target, items, cfg, progress, "r", cfg.requests, cfg.duration_s)
        elapsed = time.monotonic() - t0
        server = await watch.stop()
        ticker.cancel()
        progress.print()
        if cfg.progress:
            print(file=sys.stderr)
        return summarize(cfg, target.name, target.info, records, sent, elapsed, server, started_at)
    finally:
        await target.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run_leaninteract(cfg: RunConfig, items: list[workloads.Item] | None) -> dict:
    """LeanInteract is a library: its runner drives the REPLs in-process, in the peers venv."""
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{python} missing: run benchmarks/peers/setup.sh")
    items = items if items is not None else workloads.load(cfg.workload, scale=cfg.scale, limit=cfg.limit)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    tmp = Path(tempfile.mkdtemp(prefix="bench-leaninteract-"))
    try:
        workloads.dump_jsonl(items, tmp / "items.jsonl")
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update({"LEANRPC_PYTHON": sys.executable, "LEANRPC_STANDIN_ARGS": " ".join(_standin_args(cfg))})
        warmup = cfg.warmup if cfg.warmup >= 0 else 2 * cfg.workers
        command = [
            str(python), str(REPO / "benchmarks" / "peers" / "leaninteract_runner.py"),
            "--items", str(tmp / "items.jsonl"), "--out", str(tmp / "records.jsonl"),
            "--workers", str(cfg.workers), "--concurrency", str(cfg.concurrency or 2 * cfg.workers),
            "--duration", str(cfg.duration_s), "--requests", str(cfg.requests),
            "--warmup", str(warmup), "--shim", str(SHIM_DIR), "--work", str(tmp),
            "--timeout", str(cfg.timeout_s), "--reuse" if cfg.reuse else "--no-reuse",
        ]
        if not cfg.progress:
            command.append("--quiet")
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        # The runner prints "READY" once its REPLs are warm; measure its resources from then on.
        ready = process.stdout.readline().strip()
        if ready != "READY":
            process.wait()
            raise RuntimeError(f"leaninteract runner failed to start (exit {process.returncode})")
        watch = ResourceWatch(process.pid)
        repl_cpu0 = watch.children_cpu()
        while process.poll() is None:
            watch.sample()
            time.sleep(0.5)
        lines = process.stdout.read().strip().splitlines()
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"leaninteract runner exited with {process.returncode}")
        meta = json.loads(lines[-1])
        records = [Record(**json.loads(line)) for line in (tmp / "records.jsonl").read_text().splitlines()]
        # Runner CPU is self-reported (the process is gone by now); REPL CPU is the last
        # psutil sample of its children, taken at most 0.5 s before they were killed.
        server = {
            "pid": process.pid, "cpu_s": meta["server"]["cpu_s"], "cpu_percent": meta["server"]["cpu_percent"],
            "rss_mb_max": round(watch.rss_max / 2**20, 1),
            "repl_cpu_s": round(sum(watch.children_cpu_by_pid.values()) - repl_cpu0, 3),
            "repl_rss_mb_max": round(watch.repl_rss_max / 2**20, 1),
        }
        info = {"verifier": "stand-in", "lean_interact": meta.get("version", "")}
        return summarize(cfg, "leaninteract", info, records, meta["sent"], meta["elapsed"], server, started_at)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# reports


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(summaries: list[dict]) -> str:
    head = ("target", "rpc", "workers", "reuse", "core", "sent", "answered", "lost", "req/s", "ideal",
            "ratio", "repl cpu", "repl busy", "p50 ms", "p90 ms", "p99 ms", "max ms", "ovh p50", "ovh p99", "srv p50", "srv p99", "srv cpu%", "srv MB")
    rows = [head]
    for s in summaries:
        c = s["config"]
        rows.append((
            s["target"], c["rpc"] if s["target"] == "leanrpc" else "-", str(c["workers"]),
            "on" if c["reuse"] else "off",
            ("py" if c["pure_python"] else "native") if s["target"] == "leanrpc" else "-",
            str(s["requests"]["sent"]), str(s["requests"]["answered"]), str(s["requests"]["lost"]),
            f"{s['throughput_rps']:.2f}", f"{s['ideal_rps']:.2f}", f"{s['ratio_to_ideal']:.3f}",
            f"{s['server']['repl_cpu_share']:.2f}", _fmt(s["server"].get("repl_busy_share"), 2),
            *(_fmt(s["latency_ms"][k], 1) for k in ("p50", "p90", "p99", "max")),
            *(_fmt(s["overhead_ms"][k], 2) for k in ("p50", "p99")),
            *(_fmt(s["server_internal_ms"][k], 2) for k in ("p50", "p99")),
            f"{s['server']['cpu_percent']:.0f}", f"{s['server']['rss_mb_max']:.0f}",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    statuses = [f"{s['target']}: " + ", ".join(f"{k}={v}" for k, v in {**s["statuses"], **s["errors"]}.items())
                for s in summaries]
    return "\n".join(lines + [""] + statuses)


def aggregate(summaries: list[dict]) -> dict:
    """Mean over rounds of one configuration; counts are summed."""
    first = summaries[0]
    out = json.loads(json.dumps(first))
    out["rounds"] = len(summaries)
    for key in ("sent", "recorded", "answered", "failed", "lost"):
        out["requests"][key] = sum(s["requests"][key] for s in summaries)
    for bucket in ("statuses", "errors"):
        merged: dict[str, int] = {}
        for s in summaries:
            for k, v in s[bucket].items():
                merged[k] = merged.get(k, 0) + v
        out[bucket] = merged
    for key in ("throughput_rps", "ideal_rps", "ratio_to_ideal", "duration_s"):
        out[key] = round(statistics.fmean(s[key] for s in summaries), 4)
    for section in ("latency_ms", "repl_ms", "overhead_ms", "server_internal_ms"):
        for k in ("mean", "p50", "p90", "p99", "max"):
            values = [s[section][k] for s in summaries if s[section][k] is not None]
            out[section][k] = round(statistics.fmean(values), 3) if values else None
        out[section]["n"] = sum(s[section]["n"] for s in summaries)
    for k in ("cpu_s", "cpu_percent", "rss_mb_max", "repl_cpu_s", "repl_rss_mb_max", "repl_cpu_share", "repl_busy_share"):
        values = [s["server"].get(k) for s in summaries if s["server"].get(k) is not None]
        out["server"][k] = round(statistics.fmean(values), 3) if values else None
    out["per_round"] = [{"throughput_rps": s["throughput_rps"], "p50": s["latency_ms"]["p50"],
                         "p99": s["latency_ms"]["p99"], "started_at": s["started_at"]} for s in summaries]
    return out


async def run_rounds(configs: dict[str, RunConfig], rounds: int) -> dict[str, dict]:
    """Runs every configuration once per round, reversing the order on odd rounds, so slow drift
    of the machine's load hits all configurations alike."""
    results: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            print(f"--- round {r + 1}/{rounds}: {name}", file=sys.stderr)
            results[name].append(await run_async(dataclasses.replace(configs[name])))
    return {name: aggregate(runs) for name, runs in results.items()}


def scaling_configs(base: RunConfig, worker_counts: list[int]) -> dict[str, RunConfig]:
    top = max(worker_counts)
    configs = {f"workers={w}": dataclasses.replace(base, workers=w, rpc="unary", reuse=True, pure_python=False)
               for w in worker_counts}
    ref = configs[f"workers={top}"]
    configs["cache miss (reuse=false)"] = dataclasses.replace(ref, reuse=False)
    configs["streaming"] = dataclasses.replace(ref, rpc="stream")
    configs["pure-Python core"] = dataclasses.replace(ref, pure_python=True)
    return configs


def plot_throughput_latency(
    results: dict[str, dict], names: list[str], labels: list[str], path: Path,
    *, throughput_title: str, latency_title: str, ideal_label: str,
) -> Path:
    """Two panels: throughput bars against the first run's ideal, and p50/p99 latency bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.bar(labels, [results[n]["throughput_rps"] for n in names])
    left.axhline(results[names[0]]["ideal_rps"], ls="--", color="gray", label=ideal_label)
    left.set_ylabel("proofs / s")
    left.set_title(throughput_title)
    left.legend(fontsize=8)
    width = 0.38
    xs = range(len(names))
    right.bar([x - width / 2 for x in xs], [results[n]["latency_ms"]["p50"] for n in names], width, label="p50")
    right.bar([x + width / 2 for x in xs], [results[n]["latency_ms"]["p99"] for n in names], width, label="p99")
    right.set_xticks(list(xs), labels)
    right.set_ylabel("latency, ms")
    right.set_yscale("log")
    right.set_title(latency_title)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_scaling(results: dict[str, dict], worker_counts: list[int], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(5, 3.5))
    measured = [results[f"workers={w}"]["throughput_rps"] for w in worker_counts]
    ideal = [results[f"workers={w}"]["ideal_rps"] for w in worker_counts]
    ax.plot(worker_counts, ideal, "--", color="gray", label="ideal: workers / mean REPL time")
    # What the REPLs could do with the CPU they actually got on a shared machine.
    got = [results[f"workers={w}"]["ideal_rps"] * results[f"workers={w}"]["server"]["repl_cpu_share"]
           for w in worker_counts]
    ax.plot(worker_counts, got, ":", color="gray", label="ideal x CPU share the REPLs got")
    ax.plot(worker_counts, measured, "o-", label="leanrpc (unary, warm)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("workers")
    ax.set_ylabel("proofs / s")
    ax.set_xticks(worker_counts)
    ax.set_title("Throughput vs workers (REPL stand-in)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out_dir / "scaling_workers.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    top = max(worker_counts)
    names = [f"workers={top}", "streaming", "pure-Python core", "cache miss (reuse=false)"]
    labels = ["unary\nwarm", "stream\nwarm", "pure-Python\ncore", "cache miss\n(reuse=false)"]
    paths.append(
        plot_throughput_latency(
            results, names, labels, out_dir / "scaling_modes.png",
            throughput_title=f"Throughput, {top} workers", latency_title="Latency", ideal_label="ideal (warm)",
        )
    )
    return paths


def _config_from_args(args) -> RunConfig:
    return RunConfig(
        target=args.target, rpc=args.rpc, mode=args.mode, concurrency=args.concurrency, rate=args.rate,
        duration_s=args.duration, requests=args.requests, workers=args.workers, workload=args.workload,
        scale=args.scale, limit=args.limit, reuse=not args.no_reuse, pure_python=args.pure_python,
        warmup=args.warmup, seed=args.seed, timeout_s=args.timeout, progress=not args.quiet,
    )


def _write(path: str | None, data) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2) + "\n")


def cmd_run(args) -> int:
    summary = asyncio.run(run_async(_config_from_args(args)))
    _write(args.json, summary)
    print(table([summary]))
    if not args.json:
        print(json.dumps(summary, indent=2))
    return 0 if summary["requests"]["lost"] == 0 else 1


def cmd_scaling(args) -> int:
    base = _config_from_args(args)
    worker_counts = sorted({int(w) for w in args.worker_counts.split(",")})
    configs = scaling_configs(base, worker_counts)
    for cfg in configs.values():
        cfg.validate()
    results = asyncio.run(run_rounds(configs, args.rounds))
    for name, summary in results.items():
        summary["label"] = name
    _write(args.json, {"schema": SCHEMA, "kind": "scaling", "results": results})
    print(table(list(results.values())))
    print("\nconfigurations: " + "; ".join(f"{i + 1}. {n}" for i, n in enumerate(results)))
    for path in plot_scaling(results, worker_counts, Path(args.out_dir)):
        print(f"wrote {path}")
    return 0 if all(s["requests"]["lost"] == 0 for s in results.values()) else 1


def cmd_compare(args) -> int:
    from .peers import compare

    return compare.main(args, _config_from_args(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, help_text in (
        ("run", cmd_run, "one run against one target"),
        ("scaling", cmd_scaling, "leanrpc matrix: workers, cache hit/miss, unary/stream, native/pure; PNG plots"),
        ("compare", cmd_compare, "leanrpc vs Kimina vs LeanInteract, alternating rounds in one run"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        p.add_argument("--target", default="leanrpc", choices=("leanrpc", "kimina", "leaninteract"))
        p.add_argument("--rpc", default="unary", choices=("unary", "stream"))
        p.add_argument("--mode", default="closed", choices=("closed", "open"))
        p.add_argument("--concurrency", type=int, default=0, help="closed loop: requests in flight (default 2 x workers)")
        p.add_argument("--rate", type=float, default=0.0, help="open loop: Poisson arrivals per second")
        p.add_argument("--duration", type=float, default=0.0, help="seconds of load")
        p.add_argument("--requests", type=int, default=0, help="number of requests (with or instead of --duration)")
        p.add_argument("--workers", type=int, default=2)
        p.add_argument("--workload", default="kimina", choices=workloads.SOURCES)
        p.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE, help="cost scale (1 = real Lean timings)")
        p.add_argument("--limit", type=int, default=0, help="use only the first N proofs of the workload")
        p.add_argument("--no-reuse", action="store_true", help="cache miss: fresh REPL per request (reuse=false)")
        p.add_argument("--pure-python", action="store_true", help="server with LEANRPC_NO_EXTENSIONS=1")
        p.add_argument("--warmup", type=int, default=-1, help="unmeasured requests first (default 2 x workers)")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--timeout", type=float, default=120.0, help="per-request verify timeout, seconds")
        p.add_argument("--quiet", action="store_true", help="no progress line")
        p.add_argument("--json", help="write the JSON summary (or list of summaries) here")
        if name != "run":
            p.add_argument("--out-dir", default=str(REPO / "benchmarks"), help="where PNG plots go")
            p.add_argument("--rounds", type=int, default=2, help="alternating rounds per configuration")
            p.add_argument("--worker-counts", default="1,2", help="comma-separated worker counts")
            p.add_argument("--targets", default="leanrpc,kimina,leaninteract")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
