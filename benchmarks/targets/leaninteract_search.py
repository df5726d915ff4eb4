"""Target: the proof-search benchmark's search run in-process with LeanInteract.

Starts benchmarks/peers/leaninteract_search.py in the peers venv (LeanInteract is a library)
against the REPL stand-in and returns its per-statement summaries and elapsed time.
May import: benchmarks.config, benchmarks.workloads, benchmarks.targets.common.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..config import PEERS_VENV, REPO, SHIM_DIR
from ..workloads import require_data


def peers_python() -> Path:
    return PEERS_VENV / "bin" / "python"


def run_leaninteract_search(
    items: list[tuple[str, str]],
    processes: int,
    *,
    tactic_cost: float = 0.0,
    width: int,
    max_expansions: int,
    timeout_s: float = 60.0,
) -> dict:
    """{"elapsed", "version", "searches"} of one run over `items` with `processes` REPL processes."""
    require_data(items, "statements for the LeanInteract search")
    python = peers_python()
    if not python.exists():
        raise RuntimeError(f"{python} missing: run benchmarks/peers/setup.sh")
    tmp = Path(tempfile.mkdtemp(prefix="bench-li-search-"))
    try:
        (tmp / "statements.json").write_text(json.dumps(items))
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update({"LEANRPC_PYTHON": sys.executable, "LEANRPC_STANDIN_ARGS": ""})
        command = [
            str(python),
            str(REPO / "benchmarks" / "peers" / "leaninteract_search.py"),
            "--statements",
            str(tmp / "statements.json"),
            "--processes",
            str(processes),
            "--tactic-cost",
            str(tactic_cost),
            "--width",
            str(width),
            "--max-expansions",
            str(max_expansions),
            "--shim",
            str(SHIM_DIR),
            "--work",
            str(tmp),
            "--timeout",
            str(timeout_s),
        ]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        ready = process.stdout.readline().strip()
        if ready != "READY":
            process.wait()
            raise RuntimeError(
                f"leaninteract search runner failed to start (exit {process.returncode})"
            )
        out, _ = process.communicate()
        lines = out.strip().splitlines()
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"leaninteract search runner exited with {process.returncode}")
        return json.loads(lines[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
