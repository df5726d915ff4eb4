"""Suite-wide tripwire (issue 25 item 1): under the `proof` code policy no
input may ever make code-running text reach a REPL.

Every request any in-process server (or pool, or worker) of the suite writes
to a REPL is encoded by `leanrpc.repl.encode`, the one encoder of REPL
requests. For the whole run it is wrapped: a command or tactic whose text the
`proof` policy refuses (`#eval`, `run_tac`, `@[command_elab]`,
`set_option debug.*`, native evaluation, …; the server's own identity probe
aside) is recorded against the running test, and the test FAILS unless it is
marked `runs_user_code` (it runs under the `trusted` policy on purpose, or it
drives a pool or worker directly, below the doors that apply the policy).
tests/policy/test_policy_doors.py proves the same at every door with a
hostile REPL that forges VALID for such text; this hook holds the rest of
the suite to it. `test_the_tripwire_fires` shows it can fail.
Servers started as separate processes (the CLI tests) are not covered here:
the doors they run are the same code.

It also keeps the suite off the network: TRL's trainers send Hugging Face
telemetry from a thread of their own unless `HF_HUB_DISABLE_TELEMETRY` is set
(huggingface_hub reads it once, at import), and that thread's sockets and
certificate files would land in the middle of other tests.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import shutil
import subprocess
from pathlib import Path

import pytest

from leanrpc import repl as _repl
from leanrpc.policy import scan as _scan
from leanrpc.repl.probes import IDENTITY_PROBE

_MARK = "runs_user_code"
_SEEN: list[str] = []  # code-running texts encoded during the running test
_original_encode = _repl.encode


def _text_of(request) -> str:
    if isinstance(request, dict):
        return request.get("cmd") or request.get("tactic") or ""
    return getattr(request, "cmd", None) or getattr(request, "tactic", None) or ""


def code_running(text: str) -> bool:
    """Whether the `proof` policy would keep `text` from a REPL."""
    if not text or text == IDENTITY_PROBE:
        return False
    found = _scan(text)
    return bool(found.refused or found.native)


def _tripwire_encode(request):
    text = _text_of(request)
    if text and code_running(text):
        _SEEN.append(text)
    return _original_encode(request)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{_MARK}: the test sends code-running text to a REPL on purpose (the `trusted` policy, or "
        "a pool/worker driven below the doors); exempt from the suite-wide code tripwire",
    )
    _repl.encode = _tripwire_encode


def pytest_unconfigure(config):
    _repl.encode = _original_encode


@pytest.fixture(autouse=True)
def _code_tripwire(request):
    _SEEN.clear()
    yield
    seen, _SEEN[:] = list(_SEEN), []
    if seen and request.node.get_closest_marker(_MARK) is None:
        shown = "; ".join(repr(text[:120]) for text in seen[:5])
        pytest.fail(
            f"code-running text reached a REPL in a test not marked {_MARK} ({len(seen)} request(s)): "
            f"{shown}",
            pytrace=False,
        )


NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"


@pytest.fixture(scope="session")
def node_client() -> Path:
    """clients/node with its dependencies installed (`npm ci`, exactly package-lock.json)
    and the contract copy in place (the `prepare` script), whichever test asks first."""
    assert shutil.which("node") and shutil.which("npm"), (
        "node and npm are needed for the Node client"
    )
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=600
        )
    subprocess.run(["npm", "run", "--silent", "prepare"], cwd=NODE_DIR, check=True, timeout=120)
    assert (NODE_DIR / "proto" / "leanrpc" / "v1" / "verifier.proto").is_file()
    return NODE_DIR


@pytest.fixture
async def running_app():
    """The shared server: a started App (loopback port, one stand-in worker), stopped
    after the test with a check that none of its workers outlived it (testkit.running_server;
    call that directly for other settings)."""
    import testkit

    async with testkit.running_server() as app:
        yield app
