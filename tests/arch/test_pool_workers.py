"""Only pool/pool.py changes the pool's workers list (append/remove/pop/clear).

The supervisor and runner get the pool through typed ports (pool/ports.py) and
ask `discard_worker` to drop a dead worker. Read from the source with the AST.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
OWNER = SERVER / "pool" / "pool.py"
MUTATORS = {"append", "remove", "pop", "clear", "insert", "extend"}


def _workers_mutations(tree: ast.AST):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "workers"
        ):
            yield node.lineno


def test_only_the_pool_changes_its_workers_list():
    offenders = []
    for path in SERVER.rglob("*.py"):
        if path == OWNER:
            continue
        for line in _workers_mutations(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, f"pool.workers changed outside pool.py: {offenders} (use discard_worker)"


def test_the_check_sees_a_mutation():
    assert list(_workers_mutations(ast.parse("pool.workers.remove(w)\n"))) == [1]
    assert not list(_workers_mutations(ast.parse("workers.remove(w)\n")))
