"""The load driver: closed or open loop against one target, rounds of alternating targets.

May import: benchmarks.{config,measure,report,workloads,targets}.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import workloads
from .config import Record, RunConfig
from .measure import ResourceWatch
from .report import aggregate, summarize
from .targets import make_target
from .targets.leaninteract import run_leaninteract


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
        print(
            f"\r[{self.label}] {elapsed:6.1f}s sent {self.sent} done {self.done} "
            f"in-flight {self.sent - self.done} errors {self.errors} {rate:7.1f} req/s",
            end="",
            file=sys.stderr,
            flush=True,
        )


async def drive(
    target,
    items: list[workloads.Item],
    cfg: RunConfig,
    progress: Progress,
    prefix: str,
    limit_requests: int,
    duration_s: float,
) -> tuple[list[Record], int]:
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


async def run_async(cfg: RunConfig, items: list[workloads.Item] | None = None) -> dict:
    cfg.validate()
    if cfg.target == "leaninteract":
        return await asyncio.to_thread(run_leaninteract, cfg, items)
    items = (
        items
        if items is not None
        else workloads.load(cfg.workload, scale=cfg.scale, limit=cfg.limit)
    )
    workloads.require_data(items, f"items in workload {cfg.workload!r}")
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{cfg.target}-"))
    target = make_target(cfg, tmp)
    label = f"{cfg.target}{'/' + cfg.rpc if cfg.target == 'leanrpc' else ''} w={cfg.workers}"
    if cfg.target == "leanrpc" and cfg.checks == "off":
        label += " checks=off"
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
        if os.environ.get("LEANRPC_BENCH_KEEP_LOGS"):  # server logs stay for a look at tail events
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


async def run_rounds(configs: dict[str, RunConfig], rounds: int) -> dict[str, dict]:
    """Runs every configuration once per round, reversing the order on odd rounds, so slow drift
    of the machine's load hits all configurations alike."""
    results: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            print(f"--- round {r + 1}/{rounds}: {name}", file=sys.stderr)
            results[name].append(await run_async(dataclasses.replace(configs[name])))
    return {name: aggregate(runs) for name, runs in results.items()}
