"""No private hooks into asyncio or aiohttp (issue 42 item 4).

A library's private attribute changes without notice between releases, and a
hook into it hides what the code relies on. Read from the source with the AST
over server/ and clients/:

- no attribute read or `getattr` of a private name that belongs to asyncio's
  streams and transports or aiohttp's runner (ASYNC_PRIVATE), on anything but
  `self`/`cls`;
- no method named like a private aiohttp hook (`_make_server`) is overridden;
- no object's `__class__` is assigned (a type swapped at run time).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TREES = (ROOT / "server" / "leanrpc", ROOT / "clients" / "python" / "leanrpc_client")

# asyncio StreamReader/transport/protocol privates and aiohttp runner hooks.
ASYNC_PRIVATE = frozenset(
    {
        "_buffer",
        "_transport",
        "_protocol",
        "_waiter",
        "_paused",
        "_eof",
        "_limit",
        "_make_server",
        "_reg_site",
        "_server",
    }
)
PRIVATE_HOOKS = frozenset({"_make_server"})


def _sources():
    for tree in TREES:
        for path in tree.rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "/v1/" in str(rel) or "/_v1/" in str(rel) or "_pb2" in path.name:
                continue
            yield rel, ast.parse(path.read_text(), str(path))


def _owner_is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def findings(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ASYNC_PRIVATE
            and not _owner_is_self(node.value)
        ):
            out.append(f"line {node.lineno}: reads .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in ASYNC_PRIVATE
            and not _owner_is_self(node.args[0])
        ):
            out.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in PRIVATE_HOOKS
        ):
            out.append(f"line {node.lineno}: overrides {node.name}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "__class__":
                    out.append(f"line {node.lineno}: assigns __class__")
    return out


def test_the_check_finds_each_kind_of_hook():
    src = (
        "class R(web.AppRunner):\n"
        "    async def _make_server(self):\n"
        "        h = self._server\n"  # its own: fine
        "        h.__class__ = Capped\n"
        "def f(stdout, t):\n"
        "    return getattr(stdout, '_buffer', b'') or t._transport\n"
    )
    found = findings(ast.parse(src))
    assert [f.split(": ", 1)[1] for f in found] == [
        "overrides _make_server",
        "assigns __class__",
        "getattr(..., '_buffer')",
        "reads ._transport",
    ], found


def test_no_private_hooks_into_asyncio_or_aiohttp():
    found = {str(rel): hits for rel, tree in _sources() if (hits := findings(tree))}
    assert not found, f"private asyncio/aiohttp hooks (use the public API): {found}"
