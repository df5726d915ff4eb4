"""Fence cost and frame decoding, measured side by side.

    python benchmarks/studies/fence_bench.py decode    # msgspec structs vs json.loads
    python benchmarks/studies/fence_bench.py fence     # fenced vs unfenced exchanges

`decode`: typical REPL frames (a clean `{"env": N}`, a command answer with a
few messages and sorries, a 1 MB infotree answer), each decoded by
`json.loads` (what core.framing.decode_frame does) and by
`leanrpc.repl.decode` (msgspec into typed structs), alternating rounds.

`fence`: one stand-in worker, the same body sent N times per round with the
fence on and off (two workers, alternating rounds, same process), reporting
per-exchange p50 and mean; the difference is the fence's cost per command
(one extra File request answered with an IO error, plus the /proc audit).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

from leanrpc import repl

SMALL = b'{"env": 12}'
MEDIUM = json.dumps(
    {
        "sorries": [
            {
                "proofState": i,
                "pos": {"line": i, "column": 2},
                "goal": "⊢ a + b = b + a",
                "endPos": {"line": i, "column": 7},
            }
            for i in range(3)
        ],
        "messages": [
            {
                "severity": "warning",
                "pos": {"line": i, "column": 8},
                "endPos": {"line": i, "column": 9},
                "data": "declaration uses `sorry`",
            }
            for i in range(5)
        ],
        "env": 40,
    },
    ensure_ascii=False,
    indent=1,
).encode()
BIG = json.dumps(
    {
        "infotree": [
            {"node": {"stx": {"pp": "x" * 40, "kind": "k"}, "goals": ["⊢ p"] * 4}, "children": []}
        ]
        * 6000,
        "env": 3,
    },
    ensure_ascii=False,
).encode()


def _time(fn, frame: bytes, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        fn(frame)
    return (time.perf_counter() - started) / repeat


def bench_decode(rounds: int = 7) -> None:
    cases = [
        ("clean {env}", SMALL, 20000),
        ("messages+sorries", MEDIUM, 5000),
        (f"infotree {len(BIG) >> 10} KiB", BIG, 20),
    ]
    print("frame | json.loads | repl.decode (msgspec struct) | ratio json/msgspec")
    for name, frame, repeat in cases:
        loads, structs = [], []
        for _ in range(rounds):
            loads.append(_time(json.loads, frame, repeat))
            structs.append(_time(repl.decode, frame, repeat))
        a, b = statistics.median(loads), statistics.median(structs)
        print(f"{name} | {a * 1e6:.2f} us | {b * 1e6:.2f} us | {a / b:.2f}x")


async def _exchange_times(fence: str, body: str, count: int, worker_holder: dict) -> list[float]:
    worker = worker_holder[fence]
    times = []
    for _ in range(count):
        worker.reserve()
        started = time.perf_counter()
        await worker.request(repl.command(body, worker.imports_env), 30.0)
        times.append(time.perf_counter() - started)
        worker.release()
    return times


async def bench_fence(rounds: int = 10, per_round: int = 20) -> None:
    from leanrpc.config import Config
    from leanrpc.worker.launcher import Launcher, LaunchSpec
    from leanrpc.worker.worker import Worker

    config = Config()
    body = "theorem t (a b : Nat) : a + b = b + a := by\n  omega"
    workers = {}
    modes = {"on": ("on", "auto"), "no-audit": ("on", "off"), "off": ("off", "off")}
    for mode, (fence, audit) in modes.items():
        config.repl.fence, config.repl.fence_audit = fence, audit
        worker = Worker(
            f"bench-{mode}",
            LaunchSpec(argv=list(config.repl.command)),
            Launcher(),
            config.limits,
            fence=config.repl,
        )
        await worker.start(30.0)
        worker.begin_loading()
        await worker.load_header("import Mathlib", "Mathlib", 60.0)
        worker.release()
        workers[mode] = worker
    print("audited:", {mode: w.audited for mode, w in workers.items()})
    timings = {mode: [] for mode in modes}
    try:
        for i in range(rounds):
            order = list(modes) if i % 2 == 0 else list(reversed(modes))
            for mode in order:
                timings[mode] += await _exchange_times(mode, body, per_round, workers)
    finally:
        for worker in workers.values():
            await worker.stop(2.0)
    off = statistics.median(timings["off"])
    print(
        f"exchanges per mode: {len(timings['off'])} (alternating rounds of {per_round}); body: {body!r}"
    )
    print("mode | p50 ms | mean ms | p50 cost vs unfenced | ratio p50")
    for mode, times in timings.items():
        p50 = statistics.median(times)
        print(
            f"{mode} | {p50 * 1e3:.3f} | {statistics.fmean(times) * 1e3:.3f} | +{(p50 - off) * 1e3:.3f} ms | {p50 / off:.2f}x"
        )


def main(argv: list[str]) -> None:
    what = argv[1] if len(argv) > 1 else "decode"
    if what == "decode":
        bench_decode()
    elif what == "fence":
        asyncio.run(bench_fence())
    else:
        raise SystemExit(f"usage: {argv[0]} decode|fence")


if __name__ == "__main__":
    main(sys.argv)
