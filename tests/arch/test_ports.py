"""Who may do what to a worker: only the pool (and the worker itself) kills.

Services replay chains and read answers; when an answer proves a process is
not a faithful copy they raise WorkerDiverged, and the pool's runner kills the
worker (STYLE: worker states are data, changed in one place; only the pool
kills workers). Read from the source with the AST.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
MAY_KILL = ("pool", "worker")  # the rooms that own a worker's lifetime


def _kill_calls(tree: ast.AST):
    """`x.kill(ExitCause.Y)` calls: a worker's kill (a process's takes a signal)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "kill"
        ):
            args = list(node.args) + [k.value for k in node.keywords]
            if any(
                isinstance(a, ast.Attribute)
                and isinstance(a.value, ast.Name)
                and a.value.id == "ExitCause"
                for a in args
            ):
                yield node.lineno


def test_only_the_pool_kills_workers():
    offenders = []
    for path in SERVER.rglob("*.py"):
        room = path.relative_to(SERVER).parts[0]
        if room in MAY_KILL:
            continue
        for line in _kill_calls(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, (
        f"worker kills outside the pool: {offenders} (raise WorkerDiverged instead)"
    )


def test_the_check_sees_a_kill():
    # The scan must be able to fail: a service-style kill is found.
    sample = ast.parse("async def f(worker):\n    worker.kill(ExitCause.CRASH)\n")
    assert list(_kill_calls(sample)) == [2]
    assert not list(_kill_calls(ast.parse("process.kill(signal.SIGTERM)\n")))


def test_every_server_package_is_in_the_distribution():
    # setup.py lists packages by hand; a room missing from it installs from a
    # checkout (editable) but not from a wheel.
    import re

    listed = set(re.findall(r'"(leanrpc[\w.]*)"', (ROOT / "setup.py").read_text(encoding="utf-8")))
    found = {
        "leanrpc." + ".".join(p.parent.relative_to(SERVER).parts)
        if p.parent != SERVER
        else "leanrpc"
        for p in SERVER.rglob("__init__.py")
    }
    assert found - listed == set()
