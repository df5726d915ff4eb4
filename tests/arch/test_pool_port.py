"""No module above the pool imports or touches the pool's internals.

Above the pool (every room of a higher layer in test_imports.LAYERS) a module
may import from `leanrpc.pool` only the facade's names (its `__all__`), never
a pool module, and may use on a pool object only the names of the port it is
handed (server/leanrpc/pool/ports.py, read here with the AST so the list
cannot drift from the port): `PoolPort` in services and the cache, `PoolOwner`
(the port plus start, close and the published metrics) in the rooms that own
or publish the pool. A pool object is a name or attribute `pool` / `_pool`
(a config's `[pool]` section, `config.pool`, is not one); `getattr(pool,
"name")` counts as a use of `name`. The cache and the gateway hold no pool
at all (they wrap the verify service): any pool object there, `getattr(service,
"pool")` included, is a reach through the service. The pool's own rooms use their partner
ports (RunnerPort, SupervisorPort, DispatchPort) and are not checked here.
"""

from __future__ import annotations

import ast
import pathlib

from test_imports import LAYER_OF

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server"
PORTS = SERVER / "leanrpc" / "pool" / "ports.py"
FACADE = SERVER / "leanrpc" / "pool" / "__init__.py"
POOL_NAMES = {"pool", "_pool"}
# Rooms above the pool that hold it as a PoolPort (the rest hold a PoolOwner),
# and rooms that hold no pool at all.
PORT_ROOMS = {"services"}
NO_POOL_ROOMS = {"cache", "gateway"}


def _port_names() -> dict[str, set[str]]:
    """Each Protocol class of ports.py -> the names it offers (its bases' included)."""
    tree = ast.parse(PORTS.read_text(encoding="utf-8"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    names: dict[str, set[str]] = {}

    def of(name: str) -> set[str]:
        if name not in names:
            node = classes[name]
            own = {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
            own |= {
                item.name
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in classes:
                    own |= of(base.id)
            names[name] = own
        return names[name]

    return {name: of(name) for name in classes}


def _facade() -> set[str]:
    for node in ast.parse(FACADE.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError("pool/__init__.py has no __all__")


def _is_config(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return "config" in node.id
    return isinstance(node, ast.Attribute) and "config" in node.attr


def _is_pool(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in POOL_NAMES
    return (
        isinstance(node, ast.Attribute) and node.attr in POOL_NAMES and not _is_config(node.value)
    )


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    base = node.module or ""
    if not node.level:
        return base
    package = module.split(".")
    package = package[: len(package) - node.level + (1 if is_package else 0)]
    return ".".join(package + ([base] if base else []))


def offences(
    source: str, module: str, allowed: set[str], facade: set[str], *, is_package: bool = False
):
    """(line, what) for every use of the pool outside `allowed` and every import past the facade."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("leanrpc.pool."):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(module, is_package, node)
            if target.startswith("leanrpc.pool."):
                yield node.lineno, f"from {target} import ..."
            elif target == "leanrpc.pool":
                for alias in node.names:
                    if alias.name not in facade:
                        yield node.lineno, f"from leanrpc.pool import {alias.name}"
        elif isinstance(node, ast.Attribute) and _is_pool(node.value):
            if node.attr not in allowed:
                yield node.lineno, f"pool.{node.attr}"
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in POOL_NAMES
            and not allowed
            and not _is_config(node.value)
        ):
            yield node.lineno, f"{ast.unparse(node)} (this room holds no pool)"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
        ):
            if _is_pool(node.args[0]) and node.args[1].value not in allowed:
                yield node.lineno, f"{node.func.id}(pool, {node.args[1].value!r})"
            elif node.args[1].value in POOL_NAMES and not allowed:
                yield (
                    node.lineno,
                    f"{node.func.id}(..., {node.args[1].value!r}) (this room holds no pool)",
                )


def _modules_above_the_pool():
    floor = LAYER_OF["pool"]
    for path in sorted((SERVER / "leanrpc").rglob("*.py")):
        rel = path.relative_to(SERVER / "leanrpc")
        if "v1" in rel.parts:
            continue
        room = (
            rel.parts[0].removesuffix(".py")
            if len(rel.parts) > 1 or rel.name != "__init__.py"
            else ""
        )
        if LAYER_OF.get(room, -1) <= floor:
            continue
        parts = list(path.relative_to(SERVER).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        yield path, room, ".".join(parts), is_package


def test_modules_above_the_pool_use_only_its_port():
    ports, facade = _port_names(), _facade()
    found = []
    checked = 0
    for path, room, module, is_package in _modules_above_the_pool():
        allowed = (
            set()
            if room in NO_POOL_ROOMS
            else ports["PoolPort"]
            if room in PORT_ROOMS
            else ports["PoolOwner"]
        )
        for line, what in offences(
            path.read_text(encoding="utf-8"), module, allowed, facade, is_package=is_package
        ):
            found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
        checked += 1
    assert checked > 50  # the walk found the rooms above the pool
    assert not found, (
        "the pool reached past its port (use PoolPort/PoolOwner, pool/ports.py):\n"
        + "\n".join(found)
    )


def test_the_ports_are_narrow_and_name_no_internals():
    ports = _port_names()
    assert {
        "submit",
        "check_admission",
        "identity_of",
        "live_workers",
        "add_recycle_hook",
    } <= ports["PoolPort"]
    assert ports["PoolOwner"] - ports["PoolPort"] == {"start", "close", "metrics"}
    internals = {
        "workers",
        "supervisor",
        "runner",
        "admission",
        "index",
        "prefix_index",
        "slots",
        "router",
        "dispatcher",
        "stats",
        "features",
        "spawn_worker",
        "recycle",
        "release",
        "fail",
        "requeue",
    }
    assert not internals & ports["PoolOwner"]


SAMPLE = """
from leanrpc.pool.runner import Runner
from ..pool import Slots, BodyJob
from ..pool.slot import WorkerHandle

class Service:
    def __init__(self, pool, config):
        self.pool = pool
        self.timeout = config.pool.default_timeout_s
        self.limit = self.config.pool.queue_limit

    async def run(self, job):
        identity = self.pool.supervisor.identities.get("")
        alive = [w for w in self.pool.workers if w.alive]
        launcher = getattr(self.pool, "launcher", None)
        hidden = getattr(self.pool, "slots", None)
        return await self.pool.submit(job)
"""


def test_the_check_sees_a_reach_into_the_pool():
    # The scan must be able to fail: internals used and pool modules imported are found,
    # the port's names and a config's [pool] section are not.
    ports = _port_names()
    found = [
        what
        for _line, what in sorted(
            offences(SAMPLE, "leanrpc.services.sample", ports["PoolPort"], _facade())
        )
    ]
    assert found == [
        "from leanrpc.pool.runner import ...",
        "from leanrpc.pool import Slots",
        "from leanrpc.pool.slot import ...",
        "pool.supervisor",
        "pool.workers",
        "getattr(pool, 'slots')",
    ], found


def test_the_check_sees_a_reach_through_the_service():
    # The cache once found the pool through the service it wraps.
    sample = 'pool = getattr(service, "pool", None)\npool.add_state_listener(f)\nself.service.pool.submit(j)\n'
    found = sorted(offences(sample, "leanrpc.cache.sample", set(), _facade()))
    assert [line for line, _what in found] == [1, 2, 3, 3], found
    assert not list(
        offences("self.config.pool.workers\n", "leanrpc.cache.sample", set(), _facade())
    )
