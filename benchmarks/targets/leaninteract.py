"""Target: LeanInteract, a library, driven in-process by peers/leaninteract_runner.py in the peers venv.

May import: benchmarks.config, benchmarks.measure, benchmarks.report, benchmarks.targets.common.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import workloads
from ..config import PEERS_VENV, REPO, SHIM_DIR, Record, RunConfig
from ..measure import ResourceWatch, foreign_load_pct, machine_busy_s
from ..report import summarize
from .common import standin_cost_args


def run_leaninteract(cfg: RunConfig, items: list[workloads.Item] | None) -> dict:
    """LeanInteract is a library: its runner drives the REPLs in-process, in the peers venv."""
    items = (
        items
        if items is not None
        else workloads.load(cfg.workload, scale=cfg.scale, limit=cfg.limit)
    )
    workloads.require_data(items, f"items for LeanInteract ({cfg.workload})")
    python = PEERS_VENV / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{python} missing: run benchmarks/peers/setup.sh")
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    tmp = Path(tempfile.mkdtemp(prefix="bench-leaninteract-"))
    try:
        workloads.dump_jsonl(items, tmp / "items.jsonl")
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update(
            {
                "LEANRPC_PYTHON": sys.executable,
                "LEANRPC_STANDIN_ARGS": " ".join(standin_cost_args(cfg.scale)),
            }
        )
        warmup = cfg.warmup if cfg.warmup >= 0 else 2 * cfg.workers
        command = [
            str(python),
            str(REPO / "benchmarks" / "peers" / "leaninteract_runner.py"),
            "--items",
            str(tmp / "items.jsonl"),
            "--out",
            str(tmp / "records.jsonl"),
            "--workers",
            str(cfg.workers),
            "--concurrency",
            str(cfg.concurrency or 2 * cfg.workers),
            "--duration",
            str(cfg.duration_s),
            "--requests",
            str(cfg.requests),
            "--warmup",
            str(warmup),
            "--shim",
            str(SHIM_DIR),
            "--work",
            str(tmp),
            "--timeout",
            str(cfg.timeout_s),
            "--reuse" if cfg.reuse else "--no-reuse",
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
        busy0, client0, wall0 = machine_busy_s(), time.process_time(), time.monotonic()
        while process.poll() is None:
            watch.sample()
            time.sleep(0.5)
        lines = process.stdout.read().strip().splitlines()
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"leaninteract runner exited with {process.returncode}")
        meta = json.loads(lines[-1])
        records = [
            Record(**json.loads(line)) for line in (tmp / "records.jsonl").read_text().splitlines()
        ]
        # Runner CPU is self-reported (the process is gone by now), and so is its REPLs' CPU
        # over the measured phase (read by the runner itself right before and after it). The
        # last psutil sample of its children (taken up to 0.5 s before the runner killed
        # them) stays beside it as a check, and stands in where a runner reports none.
        sampled = sum(watch.children_cpu_by_pid.values()) - repl_cpu0
        reported = float(meta["server"].get("repl_cpu_s") or 0.0)
        repl_cpu = reported if reported > 0 else sampled
        ours = meta["server"]["cpu_s"] + repl_cpu + time.process_time() - client0
        server = {
            "foreign_load_pct": foreign_load_pct(
                machine_busy_s() - busy0, ours, time.monotonic() - wall0
            ),
            "pid": process.pid,
            "cpu_s": meta["server"]["cpu_s"],
            "cpu_percent": meta["server"]["cpu_percent"],
            "rss_mb_max": round(watch.rss_max / 2**20, 1),
            "repl_cpu_s": round(repl_cpu, 3),
            "repl_cpu_s_sampled": round(sampled, 3),
            "repl_rss_mb_max": round(watch.repl_rss_max / 2**20, 1),
        }
        info = {"verifier": "stand-in", "lean_interact": meta.get("version", "")}
        return summarize(
            cfg, "leaninteract", info, records, meta["sent"], meta["elapsed"], server, started_at
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
