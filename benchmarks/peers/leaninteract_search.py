"""The proof-search benchmark's search, run in-process with LeanInteract (peers venv).

`benchmarks/targets/leaninteract_search.py` starts this in benchmarks/.peers-venv. It runs
the best-first search of benchmarks/search_tree.py on each statement with LeanInteract's
tactic mode: `--processes` lanes, each a thread with its own `AutoLeanServer` (one REPL per
running search, as LeanInteract documents for parallel work), taking statements from one
shared list. A lane loads the import header once (its env is reused, LeanInteract's way to
avoid re-importing Mathlib), then per statement: the body as a `Command` (its sorry's proof
state), the tactics as `ProofStep`s one at a time, and for a tactic-mode `Completed` the
assembled proof as a `Command` in the header env (the whole-proof check the Prover does:
no error and no sorry is COMPLETED, else REFUTED).

The "REPL" is leanrpc's stand-in behind the shims (see leaninteract_runner.py). Not Lean.
Protocol: prints READY once every lane's REPL has its header, then one JSON line
{"elapsed", "version", "searches": [summary per statement, in statement order]}.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from lean_interact import AutoLeanServer, Command, LeanREPLConfig  # noqa: E402
from lean_interact.interface import LeanError, ProofStep  # noqa: E402

from benchmarks import search_tree, workloads  # noqa: E402  (stdlib-only modules of this repository)
from benchmarks.peers.leaninteract_runner import fake_repl_checkout  # noqa: E402


def _children_cpu(process: psutil.Process) -> float:
    total = 0.0
    for child in process.children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _has_error(response) -> bool:
    return any(m.severity == "error" for m in response.messages)


class Lane:
    """One REPL process and the header envs it has loaded."""

    def __init__(self, config: LeanREPLConfig, timeout: float) -> None:
        self.server = AutoLeanServer(config)
        self.timeout = timeout
        self.header_env: dict[str, int] = {}

    def env_for(self, header: str) -> int | None:
        if not header:
            return None
        if header not in self.header_env:
            loaded = self.server.run(Command(cmd=header), timeout=self.timeout)
            if isinstance(loaded, LeanError):
                raise RuntimeError(f"header failed: {loaded.message}")
            self.header_env[header] = loaded.env
        return self.header_env[header]

    def step(
        self,
        body: str,
        env: int | None,
        start,
        end,
        state: tuple[int, tuple[str, ...]],
        tactic: str,
    ):
        proof_state, path = state
        response = self.server.run(
            ProofStep(proof_state=proof_state, tactic=tactic), timeout=self.timeout
        )
        if isinstance(response, LeanError) or _has_error(response):
            return search_tree.Step(search_tree.ERROR)
        goals = tuple(response.goals)
        child = (response.proof_state, path + (tactic,))
        if goals or response.proof_status != "Completed":
            return search_tree.Step(search_tree.INCOMPLETE, child, goals)
        text = search_tree.assemble_by_sorry(body, start, end, list(child[1]))
        whole = self.server.run(Command(cmd=text, env=env), timeout=self.timeout)
        if isinstance(whole, LeanError) or _has_error(whole) or whole.sorries:
            return search_tree.Step(search_tree.REFUTED, None, goals, text)
        return search_tree.Step(search_tree.COMPLETED, None, goals, text)

    def search(
        self, name: str, code: str, tactics: list[str], width: int, max_expansions: int
    ) -> dict:
        header, body = workloads.split_imports(code)
        env = self.env_for(header)
        started = self.server.run(Command(cmd=body, env=env), timeout=self.timeout)
        if isinstance(started, LeanError) or not started.sorries:
            return {
                "name": name,
                "expansions": 0,
                "found": False,
                "path": [],
                "error": "no proof state",
            }
        sorry = started.sorries[0]
        start = (sorry.start_pos.line, sorry.start_pos.column)
        end = (sorry.end_pos.line, sorry.end_pos.column)
        tree = search_tree.BestFirst(
            (sorry.proof_state, ()),
            [sorry.goal],
            tactics,
            width=width,
            max_expansions=max_expansions,
        )
        while pairs := tree.next_round():
            tree.feed([self.step(body, env, start, end, state, tactic) for state, tactic in pairs])
        return tree.summary(name)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--statements", required=True, help="JSON file: [[name, code], ...]")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--tactic-cost", type=float, default=0.0)
    parser.add_argument("--width", type=int, default=search_tree.WIDTH)
    parser.add_argument("--max-expansions", type=int, default=search_tree.MAX_EXPANSIONS)
    parser.add_argument("--shim", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    items = workloads.require_data(
        json.loads(Path(args.statements).read_text()), f"statements in {args.statements}"
    )
    tactics = search_tree.tactic_list(args.tactic_cost)
    shim = Path(args.shim).resolve()
    config = LeanREPLConfig(
        local_repl_path=fake_repl_checkout(Path(args.work), shim),
        build_repl=False,
        lake_path=shim / "lake",
        verbose=False,
    )
    lanes = [Lane(config, args.timeout) for _ in range(args.processes)]
    for lane in lanes:
        lane.env_for(workloads.split_imports(items[0][1])[0])
    results: list[dict | None] = [None] * len(items)
    cursor = iter(range(len(items)))
    lock = threading.Lock()

    def run(lane: Lane) -> None:
        while True:
            with lock:
                k = next(cursor, None)
            if k is None:
                return
            try:
                results[k] = lane.search(
                    items[k][0], items[k][1], tactics, args.width, args.max_expansions
                )
            except Exception as exc:  # LeanInteract raises on timeouts and dead REPLs
                results[k] = {
                    "name": items[k][0],
                    "expansions": 0,
                    "found": False,
                    "path": [],
                    "error": f"{type(exc).__name__}: {exc}",
                }

    me = psutil.Process()
    print("READY", flush=True)
    cpu0, repl0 = time.process_time(), _children_cpu(me)
    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(lane,), daemon=True) for lane in lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    cpu, repl_cpu = time.process_time() - cpu0, _children_cpu(me) - repl0
    for lane in lanes:
        lane.server.kill()
    print(
        json.dumps(
            {
                "elapsed": elapsed,
                "version": importlib.metadata.version("lean-interact"),
                "driver_cpu_s": cpu,
                "repl_cpu_s": repl_cpu,
                "searches": results,
            }
        ),
        flush=True,
    )
    os._exit(0)  # AutoLeanServer's finalizers can block on already-killed REPLs


if __name__ == "__main__":
    sys.exit(main())
