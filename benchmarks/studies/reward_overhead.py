"""Each reward adapter's own overhead per sample, side by side in one run (issue 38 item 6).

    python -m benchmarks.studies.reward_overhead --groups 16 --group-size 16 --rounds 5

One `leanrpc serve` subprocess on the stand-in REPL (default checks: code policy, axioms;
statement pinned; result cache off), `--workers` warm workers. This process is only the
trainer's side: it builds GRPO-shaped batches (`--groups` problems x `--group-size`
completions, a quarter of each group duplicates, one completion in eight without code)
and reads its own CPU (user + system, `time.process_time` over all its threads) around
each way of scoring the same batch:

* `raw`: the floor, `AsyncClient.verify_batch` of the already assembled, deduplicated
  programs with their references (what any client pays to ask the question);
* `core`: `RewardCore.score` (extraction, assembly, dedup, the call, the verdict table);
* `trl`: `LeanReward.__call__` as GRPOTrainer calls it (sync, the process's loop thread),
  with `log_extra` / `log_metric` given;
* `verl`: `compute_score` once per sample from 16 executor threads (gathered into batches);
* `openrlhf`: the file form's `reward_func`, one query per call, as OpenRLHF calls it
  (32 threads, as its `asyncio.to_thread` per rollout);
* `verifiers`: `lean_rubric_reward` per sample, gathered on one loop.

The adapter's overhead per sample is (its CPU - raw's CPU) / samples. Rounds alternate
the ways (each round runs every way once, in a rotated order), and the median is reported.
May import: benchmarks.targets.common, leanrpc.client (rewards), psutil.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.targets.common import leanrpc_table, serve_leanrpc, stop_process, wait_port
from leanrpc.client import AsyncClient
from leanrpc.client.rewards import LeanReward, Problem, RewardCore, verl
from leanrpc.client.rewards import openrlhf as orl
from leanrpc.client.rewards import verifiers as vf

HEADER = "import Mathlib"


def batch(groups: int, size: int) -> tuple[list[str], list[str]]:
    """(completions, statements): GRPO groups, each on its own statement."""
    completions, statements = [], []
    for g in range(groups):
        statement = f"theorem t{g} (a b : ℕ) (h : a ≤ b + {g}) : a + {g} ≤ b + 2 * {g} + a := by\n"
        for k in range(size):
            if k % 8 == 7:
                text = "I am not sure how to prove this."
            elif k % 4 == 3:  # a duplicate of the group's first completion
                text = "<think>linear arithmetic</think>\n```lean4\n  omega\n```"
            else:
                text = f"<think>try {k}</think>\n```lean4\n{statement}  nlinarith [h, sq_nonneg (a - {k})]\n```"
            completions.append(text)
            statements.append(statement)
    return completions, statements


async def measure(address: str, completions: list[str], statements: list[str], rounds: int):
    os.environ["LEANRPC_SERVER"] = address  # verl and the OpenRLHF file form read it
    problems = [Problem(s, HEADER) for s in statements]
    core = RewardCore(server=address)
    plan = core.plan(completions, problems)
    trl = LeanReward(server=address)
    vf.configure(server=address)
    raw_client = AsyncClient(address)
    threads = ThreadPoolExecutor(32)
    loop = asyncio.get_running_loop()
    headers = [HEADER] * len(completions)

    async def raw():
        await raw_client.verify_batch(
            [c for c, _ in plan.programs], references=[r for _, r in plan.programs]
        )

    async def core_way():
        await core.score(completions, problems)

    async def trl_way():
        logged = []
        await asyncio.to_thread(
            trl,
            prompts=[""] * len(completions),
            completions=completions,
            formal_statement=statements,
            header=headers,
            log_extra=lambda k, v: logged.append(k),
            log_metric=lambda k, v: logged.append(k),
        )

    async def verl_way():
        await asyncio.gather(
            *(
                loop.run_in_executor(
                    threads,
                    lambda c=c, s=s: verl.compute_score(
                        data_source="bench",
                        solution_str=c,
                        ground_truth=s,
                        extra_info={"header": HEADER},
                    ),
                )
                for c, s in zip(completions, statements)
            )
        )

    async def openrlhf_way():
        await asyncio.gather(
            *(
                loop.run_in_executor(
                    threads, orl.reward_func, ["<|im_start|>assistant\n" + c], [None], [s]
                )
                for c, s in zip(completions, statements)
            )
        )

    async def verifiers_way():
        await asyncio.gather(
            *(
                vf.lean_rubric_reward(completion=c, answer=s, info={"header": HEADER})
                for c, s in zip(completions, statements)
            )
        )

    ways = {
        "raw": raw,
        "core": core_way,
        "trl": trl_way,
        "verl": verl_way,
        "openrlhf": openrlhf_way,
        "verifiers": verifiers_way,
    }
    for way in ways.values():  # warm-up: channels, worker headers
        await way()
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    wall: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            c0, w0 = time.process_time(), time.perf_counter()
            await ways[name]()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    await raw_client.close()
    threads.shutdown()
    return (
        {n: statistics.median(v) for n, v in cpu.items()},
        {n: statistics.median(v) for n, v in wall.items()},
        len(plan.programs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    completions, statements = batch(args.groups, args.group_size)
    n = len(completions)
    with tempfile.TemporaryDirectory() as folder:
        process, port = serve_leanrpc(leanrpc_table(args.workers, 0.0), Path(folder))
        try:
            asyncio.run(wait_port(port, process, 120, "leanrpc serve"))
            cpu, wall, programs = asyncio.run(
                measure(f"127.0.0.1:{port}", completions, statements, args.rounds)
            )
        finally:
            stop_process(process)
    print(f"{n} samples ({args.groups} groups of {args.group_size}), {programs} distinct programs")
    print(
        "| way | client CPU per batch (ms) | wall per batch (ms) | own overhead per sample (µs) |"
    )
    print("| --- | ---: | ---: | ---: |")
    for name in cpu:
        extra = "floor" if name == "raw" else f"{(cpu[name] - cpu['raw']) / n * 1e6:.0f}"
        print(f"| {name} | {cpu[name] * 1e3:.1f} | {wall[name] * 1e3:.1f} | {extra} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
