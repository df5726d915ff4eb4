"""The LeanInteract runner's measured phase ends when its last request does.

Its elapsed time is what LeanInteract's throughput is divided by. It was read
after a 1 s poll, so every run lasted a whole number of seconds (300 requests
in 12.01 s, 24.98 req/s, in every run of a session, whatever the REPLs did):
up to 1 s too long, LeanInteract's throughput read up to 8% low in a 12 s run.
Here LeanInteract's modules are stand-ins whose `run` sleeps 20 ms (the
peers venv is not needed): the phase's elapsed time must match its records.
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks import workloads
from benchmarks.config import REPO

_FAKE_LEAN_INTERACT = """
import importlib.metadata, sys, time, types
class LeanError: pass
class Command:
    def __init__(self, cmd, env=None): self.cmd, self.env = cmd, env
class LeanREPLConfig:
    def __init__(self, **kwargs): pass
class AutoLeanServer:
    def __init__(self, config): pass
    def run(self, command, timeout=None):
        time.sleep(0.02)
        return types.SimpleNamespace(env=0, messages=[], sorries=[])
    def kill(self): pass
top = types.ModuleType("lean_interact")
top.AutoLeanServer, top.Command, top.LeanREPLConfig = AutoLeanServer, Command, LeanREPLConfig
interface = types.ModuleType("lean_interact.interface")
interface.LeanError = LeanError
sys.modules["lean_interact"], sys.modules["lean_interact.interface"] = top, interface
importlib.metadata.version = lambda name: "stand-in"
"""


def test_elapsed_is_the_phase_not_a_whole_number_of_seconds(tmp_path):
    items = [
        workloads.Item(f"p{i}", f"theorem t{i} : True := trivial", 0.0, "test") for i in range(8)
    ]
    workloads.dump_jsonl(items, tmp_path / "items.jsonl")
    args = [
        "--items",
        str(tmp_path / "items.jsonl"),
        "--out",
        str(tmp_path / "records.jsonl"),
        "--workers",
        "2",
        "--concurrency",
        "4",
        "--requests",
        "8",
        "--shim",
        str(tmp_path),
        "--work",
        str(tmp_path / "work"),
    ]
    probe = (
        _FAKE_LEAN_INTERACT
        + "import runpy\n"
        + f"sys.argv = ['leaninteract_runner.py'] + {args!r}\n"
        + f"runpy.run_path({str(REPO / 'benchmarks' / 'peers' / 'leaninteract_runner.py')!r},"
        " run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads(done.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert meta["sent"] == 8 and len(records) == 8
    span = max(r["end"] for r in records) - min(r["start"] for r in records)
    # The phase holds its records (elapsed >= span) and ends with the last one:
    # a 1 s poll read at least 1.0 s for 4 rounds of 20 ms.
    assert span <= meta["elapsed"] < span + 0.5, (span, meta["elapsed"])
