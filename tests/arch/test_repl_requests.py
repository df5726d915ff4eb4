"""One module builds REPL requests; services get a worker handle, not a Worker.

Every JSON command the server sends (`{"cmd"…}`, `{"tactic"…}`,
`{"pickleTo"…}`, `{"unpickleProofStateFrom"…}`, the fence's `{"path"…}`) is
built by repl/protocol.py (its structs and the functions `command`, `tactic`,
`file_request`, `pickle_to`, `unpickle_from`). Anyone else calls those. And a
service's `WorkerCall` or recycle hook gets a `pool.slot.WorkerHandle`: it can
send requests and mark the worker tainted, never kill it or change its state.
Read from the source with the AST.
"""

from __future__ import annotations

import ast
import pathlib

from leanrpc.pool.slot import WorkerHandle

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "leanrpc"
PROTOCOL = SERVER / "repl" / "protocol.py"
# The stand-in is the REPL's side: it reads requests and writes answers.
NOT_A_CLIENT = ("standin",)
REQUEST_STRUCTS = {
    "CommandRequest",
    "FileRequest",
    "TacticRequest",
    "PickleRequest",
    "UnpickleRequest",
}
REQUEST_KEYS = {"cmd", "tactic", "pickleTo", "unpickleProofStateFrom"}


def _request_builds(tree: ast.AST):
    """Lines that build a REPL request: a request struct made, or a dict with a command key."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in REQUEST_STRUCTS:
                yield node.lineno
        elif isinstance(node, ast.Dict):
            keys = {
                k.value
                for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
            if keys & REQUEST_KEYS:
                yield node.lineno


def test_only_the_protocol_module_builds_repl_requests():
    offenders = []
    for path in SERVER.rglob("*.py"):
        if path == PROTOCOL or path.relative_to(SERVER).parts[0] in NOT_A_CLIENT:
            continue
        for line in _request_builds(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, (
        f"REPL requests built outside repl/protocol.py: {offenders} (use repl.command/tactic/...)"
    )


def test_the_protocol_module_is_where_they_are_built():
    # The scan finds the builders where they are, so it can see one elsewhere.
    assert list(_request_builds(ast.parse(PROTOCOL.read_text(encoding="utf-8"))))


def test_the_check_sees_a_hand_built_request():
    sample = ast.parse(
        "async def f(worker, s, p):\n"
        "    await worker.request({'proofState': s, 'pickleTo': p}, 1.0)\n"
        "    await worker.request(repl.TacticRequest(tactic='rfl', proof_state=s), 1.0)\n"
    )
    assert sorted(_request_builds(sample)) == [2, 3]
    assert not list(
        _request_builds(ast.parse("x = {'env': 1, 'messages': []}\nrepl.command('a', 1)\n"))
    )


def test_a_worker_handle_cannot_touch_the_workers_life():
    verbs = {
        "kill",
        "stop",
        "drain",
        "reserve",
        "release",
        "begin_loading",
        "start",
        "load_header",
        "_set_state",
        "state",
        "_worker_state",
    }
    public = {name for name in dir(WorkerHandle) if not name.startswith("__")}
    assert public & verbs == set()
    assert {"request", "taint", "built", "name", "alive"} <= public
