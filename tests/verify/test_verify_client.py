"""The Python client (sync and asyncio) and the CLI against a real server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys

import pytest

from leanrpc import cli
from leanrpc.client import AsyncClient, Client, ClientError, Message, Result
from leanrpc.config import Config, to_toml
from testkit import free_port, stop_app
from verify_support import small_config

GOOD = "import Mathlib\n\ntheorem g (a b : Nat) : a + b = b + a := by\n  omega\n"
SORRY = "import Mathlib\n\ntheorem s (n : Nat) : n = n := by\n  sorry\n"
BAD = "import Mathlib\n\ntheorem b : 1 = 2 := by\n  exact Nat.nonexistent_lemma\n"


async def test_async_client_retries_unavailable_until_the_server_starts():
    from leanrpc.app import create_server

    port = free_port()
    async with AsyncClient(f"127.0.0.1:{port}", max_retries=10, backoff_s=0.2) as client:
        pending = asyncio.ensure_future(client.verify_batch([GOOD, SORRY, BAD]))
        await asyncio.sleep(1.0)
        assert not pending.done()  # nothing listens yet: the client is retrying
        config = small_config()
        config.server.port = port
        app = await create_server(config)
        try:
            results = await asyncio.wait_for(pending, 120)
            assert [r.status for r in results] == ["VALID", "SORRY", "INVALID"]
            assert all(isinstance(r, Result) and r.verifier == "stand-in" for r in results)
            [error] = [m for m in results[2].messages if m.severity == "ERROR"]
            assert isinstance(error, Message) and (error.line, error.column) == (4, 8)
            assert "Unknown identifier" in error.text
            assert results[1].sorries[0]["line"] == 4
            # Batching over VerifyStream with a small window keeps input order.
            many = [(f"id{i}", GOOD if i % 3 else SORRY) for i in range(40)]
            streamed = await client.verify(many, window=4)
            assert [(r.id, r.status) for r in streamed] == [
                (i, "VALID" if n % 3 else "SORRY") for n, (i, _) in enumerate(many)
            ]
            as_dict = streamed[0].to_dict()
            assert as_dict["id"] == "id0" and as_dict["status"] == "SORRY" and json.dumps(as_dict)
        finally:
            await stop_app(app)

    # A server that never comes: the retries run out with a clear error.
    async with AsyncClient(f"127.0.0.1:{free_port()}", max_retries=1, backoff_s=0.05) as client:
        with pytest.raises(ClientError) as info:
            await client.verify_batch([GOOD])
        assert info.value.code.name == "UNAVAILABLE"


@pytest.fixture
def served(tmp_path):
    """`leanrpc serve --config` in a subprocess: (address, config path)."""
    config = Config()
    config.server.port = free_port()
    config.pool.workers = 2
    config.pool.default_timeout_s = 20
    path = tmp_path / "leanrpc.toml"
    path.write_text(to_toml(config))
    process = subprocess.Popen(
        [sys.executable, "-m", "leanrpc.cli", "serve", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=os.getcwd(),
    )
    try:
        line = process.stdout.readline()  # printed once the server is up
        assert line.startswith("leanrpc listening on"), line
        yield f"127.0.0.1:{config.server.port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_sync_client_and_cli_against_serve_with_config(served, tmp_path, capsys):
    with Client(served, max_retries=3) as client:
        info = client.server_info()
        assert info.workers == 2  # from the TOML file, not the default
        assert info.verifier.kind == "stand-in"
        batch = client.verify_batch([("a", GOOD), ("b", BAD)])
        assert [(r.id, r.status, r.valid) for r in batch] == [
            ("a", "VALID", True),
            ("b", "INVALID", False),
        ]
        assert dataclasses.is_dataclass(batch[0]) and batch[0].attempts == 1
        streamed = client.verify([GOOD] * 5 + [SORRY], window=2)
        assert [r.status for r in streamed] == ["VALID"] * 5 + ["SORRY"]
        assert [r.id for r in streamed] == [str(i) for i in range(6)]

    proofs = tmp_path / "proofs"
    proofs.mkdir()
    (proofs / "good.lean").write_text(GOOD)
    assert cli.main(["verify", str(proofs), "--server", served, "--json"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["status"] == "VALID"
    (proofs / "bad.lean").write_text(BAD)
    assert cli.main(["verify", str(proofs), "--server", served]) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "1 of 2 valid" in out


def test_cli_verify_exits_without_asyncio_warnings(served, tmp_path):
    """The blocking client closes its private loop cleanly (no leftover gRPC tasks)."""
    proof = tmp_path / "good.lean"
    proof.write_text(GOOD)
    done = subprocess.run(
        [sys.executable, "-m", "leanrpc.cli", "verify", str(proof), "--server", served],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "VALID" in done.stdout
    assert "Task was destroyed" not in done.stderr and "Traceback" not in done.stderr
