"""Drives LeanInteract (a library, not a server) for the side-by-side benchmark.

Runs inside benchmarks/.peers-venv (see setup.sh); `python -m benchmarks.load` starts it. One
`AutoLeanServer` per worker, each on its own thread (the pattern LeanInteract documents for
parallel checking), fed by a shared closed-loop queue of --concurrency requests. With --reuse a
worker runs each import header once and sends bodies with `env` (LeanInteract's documented
way to avoid re-importing Mathlib); with --no-reuse every request runs in a fresh REPL.

The "REPL" is leanrpc's stand-in: a fake REPL checkout whose `.lake/build/bin/repl` is the
shim script that execs `python -m leanrpc.standin`, started through the shim `lake`. Not Lean.

Protocol with the parent: prints READY once the REPLs are warm, writes one JSON record per
request to --out, then prints one JSON line {"sent", "elapsed", "server", "version"}.
"""

from __future__ import annotations

import argparse
import collections
import importlib.metadata
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lean_interact import AutoLeanServer, Command, LeanREPLConfig  # noqa: E402
from lean_interact.interface import LeanError  # noqa: E402

from benchmarks import workloads  # noqa: E402  (stdlib-only module of this repository)
from benchmarks.measure import ResourceWatch  # noqa: E402  (stdlib and psutil, which LeanInteract needs too)


def fake_repl_checkout(work: Path, shim: Path) -> Path:
    repl_dir = work / "repl"
    binary = repl_dir / ".lake" / "build" / "bin" / "repl"
    binary.parent.mkdir(parents=True, exist_ok=True)
    (repl_dir / "lean-toolchain").write_text("leanprover/lean4:v4.19.0\n")
    if binary.is_symlink() or binary.exists():
        binary.unlink()
    binary.symlink_to(shim.resolve() / "standin-repl")
    return repl_dir


class Worker:
    def __init__(self, config: LeanREPLConfig, reuse: bool, timeout: float) -> None:
        self.config = config
        self.reuse = reuse
        self.timeout = timeout
        self.server = AutoLeanServer(config)
        self.header_env: dict[str, int] = {}

    def check(self, item: workloads.Item) -> str:
        if not self.reuse:
            self.server.kill()
            self.server = AutoLeanServer(self.config)
            self.header_env.clear()
        header, body = workloads.split_imports(item.code)
        env = None
        if header:
            env = self.header_env.get(header)
            if env is None:
                loaded = self.server.run(Command(cmd=header), timeout=self.timeout)
                if isinstance(loaded, LeanError):
                    return "REJECTED"
                env = self.header_env[header] = loaded.env
        response = self.server.run(Command(cmd=body, env=env), timeout=self.timeout)
        if isinstance(response, LeanError):
            return "REJECTED"
        messages = [{"severity": m.severity, "data": m.data} for m in response.messages]
        return workloads.classify(messages, response.sorries)


class FairPool:
    """Hands free workers to waiting threads in arrival order (queue.Queue lets a thread that just
    released a worker take it straight back, starving the others and inflating the tail)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[Worker] = []
        self._waiters: collections.deque = collections.deque()

    def put(self, worker: Worker) -> None:
        with self._lock:
            if self._waiters:
                slot = self._waiters.popleft()
                slot["worker"] = worker
                slot["event"].set()
                return
            self._free.append(worker)

    def get(self) -> Worker:
        with self._lock:
            if self._free:
                return self._free.pop()
            slot = {"event": threading.Event(), "worker": None}
            self._waiters.append(slot)
        slot["event"].wait()
        return slot["worker"]

    def drain(self) -> list[Worker]:
        with self._lock:
            free, self._free = self._free, []
        return free


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration", type=float, default=0.0)
    parser.add_argument("--requests", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--shim", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--reuse", dest="reuse", action="store_true", default=True)
    parser.add_argument("--no-reuse", dest="reuse", action="store_false")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    items = workloads.require_data(workloads.read_jsonl(args.items), f"items in {args.items}")
    shim = Path(args.shim).resolve()
    repl_dir = fake_repl_checkout(Path(args.work), shim)
    config = LeanREPLConfig(
        local_repl_path=repl_dir, build_repl=False, lake_path=shim / "lake", verbose=False
    )
    workers = FairPool()
    for _ in range(args.workers):
        workers.put(Worker(config, args.reuse, args.timeout))

    lock = threading.Lock()
    counter = {"next": 0, "done": 0, "errors": 0}
    records: list[dict] = []

    def take(prefix: str, limit: int, deadline: float):
        with lock:
            n = counter["next"]
            if (limit and n >= limit) or time.monotonic() >= deadline:
                return None
            counter["next"] = n + 1
        return items[n % len(items)], f"{prefix}{n}"

    def lane(prefix: str, limit: int, deadline: float, keep: bool) -> None:
        while (nxt := take(prefix, limit, deadline)) is not None:
            item, request_id = nxt
            start = time.monotonic()
            worker = workers.get()  # waiting for a free REPL is part of the latency
            try:
                status = worker.check(item)
            except Exception as exc:  # LeanInteract raises on timeouts and dead REPLs
                status = f"client:{type(exc).__name__}"
                try:
                    worker = Worker(config, args.reuse, args.timeout)
                except Exception:
                    pass
            finally:
                workers.put(worker)
            end = time.monotonic()
            if keep:
                with lock:
                    records.append(
                        {
                            "id": request_id,
                            "start": start,
                            "end": end,
                            "status": status,
                            "burn_s": item.burn_s,
                            "repl_s": None,
                            "queue_s": None,
                            "verifier": "stand-in",
                        }
                    )
                    counter["done"] += 1
                    counter["errors"] += ":" in status

    def run_phase(prefix: str, limit: int, duration: float, keep: bool) -> float:
        counter["next"] = 0
        deadline = time.monotonic() + duration if duration else float("inf")
        threads = [
            threading.Thread(target=lane, args=(prefix, limit, deadline, keep), daemon=True)
            for _ in range(args.concurrency)
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        # Joined, never polled with a sleep: the phase ends when its last lane
        # does. (A 1 s poll here made every run's elapsed time a whole number
        # of seconds, up to 1 s too long: LeanInteract read 24.98 req/s, 300 in
        # 12.01 s, whatever its REPLs did.)
        for t in threads:
            while t.is_alive():
                t.join(1.0)
                if not keep or args.quiet or not t.is_alive():
                    continue
                elapsed = time.monotonic() - t0
                print(
                    f"\r[leaninteract w={args.workers}] {elapsed:6.1f}s sent {counter['next']} "
                    f"done {counter['done']} errors {counter['errors']} "
                    f"{counter['done'] / max(elapsed, 1e-9):7.1f} req/s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        return time.monotonic() - t0

    if args.warmup:
        run_phase("warm-", args.warmup, 0.0, keep=False)
    print("READY", flush=True)
    cpu0 = time.process_time()
    watch = ResourceWatch(os.getpid())  # reads the REPLs' CPU now, as its start
    elapsed = run_phase("r", args.requests, args.duration, keep=True)
    cpu = time.process_time() - cpu0
    repl = watch.children_cpu() - watch.repl_cpu0
    if not args.quiet:
        print(file=sys.stderr)
    with open(args.out, "w") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    sent = counter["next"]
    for worker in workers.drain():
        worker.server.kill()
    print(
        json.dumps(
            {
                "sent": sent,
                "elapsed": elapsed,
                "version": importlib.metadata.version("lean-interact"),
                # REPL CPU over the measured phase: the live REPLs read right before and
                # right after it (a REPL that exited meanwhile keeps its last reading).
                "server": {
                    "cpu_s": round(cpu, 3),
                    "cpu_percent": round(100 * cpu / max(elapsed, 1e-9), 1),
                    "repl_cpu_s": round(repl, 3),
                },
            }
        ),
        flush=True,
    )
    os._exit(0)  # AutoLeanServer's finalizers can block on already-killed REPLs


if __name__ == "__main__":
    sys.exit(main())
