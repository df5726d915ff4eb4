"""No module above the pool reads a job's bookkeeping (issue 42 item 1).

A service builds a job (what it asks for) and reads its outcome or its
error (which carries `attempts`); the future, the current attempt, the
attempt counts, the queue time and the routing view are the pool's own.
Read from the source with the AST: an attribute of that name read off a
name that says it is a job (`job`, `lead_job`, …) outside pool/.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
POOL = SERVER / "pool"
BOOKKEEPING = frozenset(
    {
        "future",
        "task",
        "load",
        "attempt",
        "attempts",
        "uncharged",
        "fresh_process",
        "solo",
        "enqueued_at",
        "inflight_key",
        "view",
        "make_view",
    }
)


def _bookkeeping_reads(tree: ast.AST):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in BOOKKEEPING
            and isinstance(node.value, ast.Name)
            and "job" in node.value.id.lower()
        ):
            yield node.lineno, node.attr


def test_no_module_above_the_pool_reads_a_job_s_bookkeeping():
    offenders = []
    for path in SERVER.rglob("*.py"):
        if POOL in path.parents:
            continue
        for line, attr in _bookkeeping_reads(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line} .{attr}")
    assert not offenders, f"a job's bookkeeping read above the pool: {offenders}"


def test_the_check_sees_a_read():
    assert list(_bookkeeping_reads(ast.parse("n = job.attempts\n"))) == [(1, "attempts")]
    assert list(_bookkeeping_reads(ast.parse("job.task is None\n"))) == [(1, "task")]
    assert not list(_bookkeeping_reads(ast.parse("n = outcome.attempts\n")))
