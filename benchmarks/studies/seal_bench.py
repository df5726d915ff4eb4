"""What the cache entries' MAC costs per hit, against what elaborating costs (issue 26).

    python -m benchmarks.studies.seal_bench --statements 4 --completions 64 --rounds 5

One run, side by side: the unique snippets of the GRPO workload
(benchmarks.grpo, 50% duplicates) are elaborated once on a stand-in pool
(Kimina-scaled costs; each one's wall time is "elaborating"); their verdicts
are stored in a disk tier and, when `redis-server` is installed, a Redis tier
started on loopback for the run. Then every duplicate is looked up from each
tier with a fresh memory tier in front (so each lookup is a disk or Redis
hit), in alternating rounds with the MAC on (the real `Sealer`) and off (a
pass-through: what the tiers cost before issue 26). The memory tier (no MAC:
same process) is measured too, as the hit most GRPO duplicates get.

May import: benchmarks.grpo, benchmarks.workloads, leanrpc (config, pool, services, cache).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import workloads
from benchmarks.grpo import grpo_items

SECRET = b"seal-bench-secret-0123456789abcdef"


class _NoSeal:
    """The tiers without a MAC (before issue 26)."""

    def seal(self, key: str, entry: bytes) -> bytes:
        return entry

    def open(self, key: str, sealed: bytes) -> bytes:
        return sealed


def _key(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


async def elaborate(unique: list[str], scale: float) -> tuple[list, list[float]]:
    from leanrpc.config import Config
    from leanrpc.pool.pool import Pool
    from leanrpc.services.verify import VerifyOptions, VerifyService

    config = Config()
    config.server.port = 0
    config.pool.workers = 1
    config.limits.max_system_memory_percent = 0
    config.cache.enabled = False
    config.repl.command = [
        sys.executable,
        "-m",
        "leanrpc.standin",
        "--import-cost",
        f"{workloads.import_cost(scale):.4f}",
        "--reimport-cost",
        f"{workloads.import_cost(scale) / 4:.4f}",
    ]
    pool = Pool(config)
    await pool.start()
    service = VerifyService(pool, config)
    results, walls = [], []
    try:
        await service.verify("warm", unique[0], VerifyOptions(timeout_s=120))
        for n, code in enumerate(unique):
            started = time.perf_counter()
            results.append(await service.verify(f"u{n}", code, VerifyOptions(timeout_s=120)))
            walls.append(time.perf_counter() - started)
    finally:
        await pool.close(2.0)
    return results, walls


def _start_redis(folder: Path):
    binary = shutil.which("redis-server")
    if binary is None:
        return None, ""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(500):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.02)
    process.kill()
    return None, ""


async def hits(tier, lookups: list[str], sealed: bool) -> list[float]:
    """Seconds per lookup of each key from `tier` behind an empty memory tier."""
    from leanrpc.cache import MemoryStore, ResultCache
    from leanrpc.cache.seal import Sealer

    tier.sealer = Sealer(SECRET) if sealed else _NoSeal()
    cache = ResultCache(
        MemoryStore(256 << 20), **{"disk" if tier.name == "disk" else "shared": tier}
    )
    times = []
    for key in lookups:
        cache.memory.discard(key)
        started = time.perf_counter()
        found = await cache.lookup(key)
        times.append(time.perf_counter() - started)
        assert found is not None and found[1] == tier.name, (tier.name, sealed, key, cache.stats)
    assert cache.stats.forged == 0
    return times


async def run(args) -> dict:
    from leanrpc.cache import DiskStore, MemoryStore, RedisStore, ResultCache, codec
    from leanrpc.cache.seal import Sealer

    items = grpo_items(args.statements, args.completions, 0.5, scale=args.scale)
    unique = sorted({i.code for i in items})
    lookups = [_key(i.code) for i in items]  # every completion, duplicates included
    results, walls = await elaborate(unique, args.scale)
    tmp = Path(tempfile.mkdtemp(prefix="leanrpc-seal-bench-"))
    redis_process, redis_url = _start_redis(tmp)
    times: dict[tuple[str, bool], list[float]] = {}
    mac_only: dict[bool, list[float]] = {True: [], False: []}
    try:
        tiers = [DiskStore(tmp / "disk", secret=SECRET)]
        if redis_url:
            tiers.append(RedisStore(redis_url, secret=SECRET, timeout_s=5.0))
        for round_ in range(args.rounds):
            for sealed in (True, False) if round_ % 2 == 0 else (False, True):
                for tier in tiers:
                    # Stored under this round's layout (sealed or not), one write at a time.
                    tier.sealer = Sealer(SECRET) if sealed else _NoSeal()
                    for code, result in zip(unique, results):
                        key = _key(code)
                        await tier.put(
                            key, tier.sealer.seal(key, codec.encode(key, "run", 0.0, result))
                        )
                    times.setdefault((tier.name, sealed), []).extend(
                        await hits(tier, lookups, sealed)
                    )
        memory = ResultCache(MemoryStore(256 << 20))
        for code, result in zip(unique, results):
            memory.store(_key(code), "run", result)
        memory_times = []
        for _ in range(args.rounds):
            for key in lookups:
                started = time.perf_counter()
                await memory.lookup(key)
                memory_times.append(time.perf_counter() - started)
        sealer = Sealer(SECRET)
        entry = codec.encode(lookups[0], "run", 0.0, results[0])
        sealed_entry = sealer.seal(lookups[0], entry)
        for _ in range(2000):
            started = time.perf_counter()
            sealer.open(lookups[0], sealed_entry)
            mac_only[True].append(time.perf_counter() - started)
        for tier in tiers:
            if tier.name == "redis":
                await tier.close()
    finally:
        if redis_process is not None:
            redis_process.kill()
            redis_process.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "items": len(items),
        "unique": len(unique),
        "walls": walls,
        "body": [r.timings.body_s for r in results],
        "times": times,
        "memory": memory_times,
        "mac_open": mac_only[True],
        "entry_bytes": len(entry),
        "redis": bool(redis_url),
        "load": os.getloadavg(),
    }


def report(row: dict) -> str:
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    elaborate_ms = ms(row["walls"])
    lines = [
        f"{row['items']} GRPO completions ({row['unique']} unique) looked up; elaborating one unique snippet: "
        f"median {elaborate_ms:.2f} ms wall (REPL body {ms(row['body']):.2f} ms); entry {row['entry_bytes']} bytes; "
        f"HMAC check alone (Sealer.open): median {ms(row['mac_open']) * 1000:.1f} us",
        "",
        "| tier | hit, MAC on (median ms) | hit, MAC off (median ms) | MAC cost per hit | elaborating / hit (MAC on) |",
        "|---|---|---|---|---|",
        f"| memory (no MAC: in process) | {ms(row['memory']):.4f} | - | - | {elaborate_ms / ms(row['memory']):,.0f}x |",
    ]
    for name in ("disk", "redis"):
        if (name, True) not in row["times"]:
            continue
        on, off = ms(row["times"][(name, True)]), ms(row["times"][(name, False)])
        lines.append(
            f"| {name} | {on:.4f} | {off:.4f} | {(on - off) * 1000:+.1f} us | {elaborate_ms / on:,.0f}x |"
        )
    load = ", ".join(f"{x:.1f}" for x in row["load"])
    lines += ["", f"load average at the end: {load}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--statements", type=int, default=4)
    parser.add_argument("--completions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=workloads.DEFAULT_SCALE)
    args = parser.parse_args(argv)
    print(report(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
