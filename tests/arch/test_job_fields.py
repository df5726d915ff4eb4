"""Jobs are frozen requests; the pool's bookkeeping is its own ticket (issue 42 item 1).

A service builds a job (what it asks for) and reads its outcome or its
error (which carries `attempts`); the future, the current attempt, the
attempt counts, the queue time and the routing view are the pool's own, on
its `Ticket` (pool/ticket.py). Checked here:

* a job is frozen: setting a field (`job.attempts = 1`) raises
  FrozenInstanceError, for every kind;
* no module above the pool sets an attribute on a job (an assignment,
  `setattr` or `object.__setattr__` on a name that says it is a job);
* no module outside pool/ reads a job's bookkeeping (an attribute of that
  name read off a name that says it is a job: `job`, `lead_job`, …);
* pool/ticket's names are imported only inside pool/, and neither the pool's
  facade nor its upward ports (`PoolPort`, `PoolOwner`) name a Ticket, so
  nothing above the pool can get hold of one.

Read from the source with the AST.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

from leanrpc.core.headers import split_header
from leanrpc.pool import BodyJob, CallJob, SessionJob
from test_imports import LAYER_OF

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
POOL = SERVER / "pool"
TICKET_MODULE = "leanrpc.pool.ticket"
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


# -- frozen jobs ---------------------------------------------------------------------


class _Call:
    scope = "proof 1"
    text = "constructor"

    def held_chars(self, worker_name: str) -> int:
        return 0

    async def run(self, worker, base_env: int, timeout: float) -> None:
        return None


def _jobs():
    split = split_header("import Mathlib\ntheorem t : True := trivial\n")
    session = type("SessionCall", (), {"text": "def d := 1", "parent": None})()
    session.session = type("Session", (), {"uid": "s1"})()
    return [
        BodyJob(split=split, timeout_s=5),
        SessionJob(split=split, timeout_s=5, session=session),
        CallJob(split=split, timeout_s=5, call=_Call()),
    ]


@pytest.mark.parametrize("job", _jobs(), ids=lambda job: type(job).__name__)
def test_a_job_is_frozen(job):
    text, scope = job.text, job.scope  # derived once, at construction
    assert text and scope
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.attempts = 1  # the pool's count lives on its ticket
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.text = "theorem u : False := sorry"
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.timeout_s = 1e9
    assert (job.text, job.scope) == (text, scope)


# -- no module above the pool sets a job's attribute ------------------------------------


def _room(path: pathlib.Path) -> str:
    parts = path.relative_to(SERVER).with_suffix("").parts
    return "" if len(parts) == 1 else parts[0]


def _above_the_pool() -> list[pathlib.Path]:
    return [
        path
        for path in SERVER.rglob("*.py")
        if LAYER_OF.get(_room(path), -1) > LAYER_OF["pool"]
        and "v1" not in path.relative_to(SERVER).parts
    ]


def _is_job(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and "job" in node.id.lower()


def _job_attribute_sets(tree: ast.AST):
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and _is_job(part.value):
                    yield node.lineno, part.attr
        if isinstance(node, ast.Call) and node.args and _is_job(node.args[0]):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in {"setattr", "__setattr__", "delattr", "__delattr__"}:
                yield node.lineno, name


def test_no_module_above_the_pool_sets_an_attribute_on_a_job():
    modules = _above_the_pool()
    assert any(path.parts[-2:] == ("services", "verify.py") for path in modules)
    offenders = []
    for path in modules:
        for line, attr in _job_attribute_sets(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line} .{attr}")
    assert not offenders, f"a job's attribute set above the pool: {offenders}"


def test_the_set_check_sees_each_way_of_setting():
    for source in (
        "job.attempts = 1\n",
        "body_job.deadline += 1\n",
        "a, job.future = 1, 2\n",
        "setattr(job, 'solo', True)\n",
        "object.__setattr__(job, 'text', '')\n",
        "del job.view\n",
    ):
        assert list(_job_attribute_sets(ast.parse(source))), source
    assert not list(_job_attribute_sets(ast.parse("outcome.attempts = 1\njob = make()\n")))


# -- the ticket stays in the pool ---------------------------------------------------------


def _imports_of_ticket(path: pathlib.Path):
    """Each import in `path` that reaches pool/ticket.py (absolute or relative)."""
    module = "leanrpc." + ".".join(path.relative_to(SERVER).with_suffix("").parts)
    package = (
        module.rsplit(".", 1)[0] if path.name != "__init__.py" else module[: -len(".__init__")]
    )
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == TICKET_MODULE or alias.name.startswith(TICKET_MODULE + "."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            named = {f"{base}.{alias.name}" for alias in node.names}
            if base == TICKET_MODULE or TICKET_MODULE in named:
                yield node.lineno, base


def test_only_the_pool_imports_the_ticket():
    inside = [p for p in POOL.rglob("*.py") if list(_imports_of_ticket(p))]
    assert POOL / "pool.py" in inside  # the check sees the pool's own imports
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in SERVER.rglob("*.py")
        if POOL not in path.parents
        for line, name in _imports_of_ticket(path)
    ]
    assert not offenders, f"pool/ticket imported outside pool/: {offenders}"


def test_nothing_above_the_pool_is_handed_a_ticket():
    facade = ast.parse((POOL / "__init__.py").read_text(encoding="utf-8"))
    names = {
        alias.name
        for node in ast.walk(facade)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert "Ticket" not in names and "ticket" not in names
    ports = ast.parse((POOL / "ports.py").read_text(encoding="utf-8"))
    for node in ports.body:
        if isinstance(node, ast.ClassDef) and node.name in {"PoolPort", "PoolOwner"}:
            assert "Ticket" not in ast.unparse(node), f"{node.name} names a Ticket"
