"""Only pool/attempt.py and pool/supervisor.py kill workers (issue 42 item 1).

A worker changes hands during a job's attempt only through the Attempt's
transition table; outside an attempt, only the supervisor decides a process
goes (header switches, spares, failed preloads). The worker layer itself
(worker/) kills its own process on a timeout or a poisoned exchange and is
not counted. Read from the source with the AST: any call `x.kill(…)` but the
process-level `os.kill` / `ray.kill` (a signal to a pid, an actor).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
NOT_WORKERS = frozenset({"os", "ray"})
KILLERS = {SERVER / "pool" / "attempt.py", SERVER / "pool" / "supervisor.py"}


def _worker_kills(tree: ast.AST):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "kill"
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in NOT_WORKERS)
        ):
            yield node.lineno


def test_only_the_attempt_and_the_supervisor_kill_workers():
    offenders = []
    for path in SERVER.rglob("*.py"):
        if path in KILLERS or (SERVER / "worker") in path.parents:
            continue
        for line in _worker_kills(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, f"workers killed outside the Attempt and the supervisor: {offenders}"


def test_the_killers_do_kill():
    for path in KILLERS:
        assert list(_worker_kills(ast.parse(path.read_text(encoding="utf-8")))), path


def test_the_check_sees_a_kill():
    assert list(_worker_kills(ast.parse("worker.kill(ExitCause.CRASH)\n"))) == [1]
    assert list(_worker_kills(ast.parse("self.worker.kill(cause)\n"))) == [1]
    assert not list(_worker_kills(ast.parse("os.kill(pid, 9)\n")))
