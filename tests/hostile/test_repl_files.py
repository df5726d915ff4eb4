"""A REPL cannot freeze the server with the files it names, nor hand out
proof states it never allocated (issue 26 item 5; tests/hostile/trapdoor_repl.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from leanrpc.services.prover.pickles import _read_regular
from testkit import TRAPDOOR, loopback_config

AND_STATEMENT = "theorem and_intro_t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_support import Served  # noqa: E402


def test_a_fifo_is_not_read_and_the_open_does_not_wait(tmp_path):
    os.mkfifo(tmp_path / "state.olean")
    assert (
        _read_regular(str(tmp_path), "state.olean", 1 << 20) is None
    )  # returns at once: no writer needed
    (tmp_path / "real.olean").write_bytes(b"pickle")
    assert _read_regular(str(tmp_path), "real.olean", 1 << 20) == b"pickle"
    os.symlink(tmp_path / "real.olean", tmp_path / "link.olean")
    assert _read_regular(str(tmp_path), "link.olean", 1 << 20) is None


async def _pickle_through_a_recycle(client) -> list:
    """A proof whose states live on workers recycled after every job
    (max_requests_per_worker = 1: each live state is pickled first, here into
    a FIFO); returns the answers that had to rebuild them."""
    proof = await client.start_proof(AND_STATEMENT)
    split = await client.run_tactic(proof.states[0].state_id, "constructor")
    left = await client.run_tactic(split.state_id, "exact hp")
    assert left.status != "ERROR", left.error
    return [
        await client.run_tactic(split.state_id, "exact hp"),
        await client.run_tactic(left.state_id, "exact hq"),
    ]


def test_a_repl_answering_pickles_with_fifos_leaves_the_server_serving(tmp_path):
    log = tmp_path / "trapdoor.log"
    config = tmp_path / "server.toml"
    command = ", ".join(f'"{part}"' for part in [*TRAPDOOR, "fifo-pickles", f"log={log}"])
    config.write_text(
        f'[repl]\ncommand = [{command}]\n[sandbox]\nmode = "off"\n'
        "[limits]\nmax_requests_per_worker = 1\nmax_system_memory_percent = 0\n[cache]\nenabled = false\n"
    )
    served = Served("--config", str(config))
    try:

        async def drive():
            client = AsyncClient(served.address, max_retries=0)
            try:
                after = await _pickle_through_a_recycle(client)
                info = await client.server_info()  # the loop answers: no open blocked it
                return after, info
            finally:
                await client.close()

        after, info = asyncio.run(drive())
        assert [r.status for r in after] == ["INCOMPLETE", "COMPLETED"], [r.error for r in after]
        assert info.serving
        assert log.exists() and "fifo " in log.read_text()  # the REPL did leave FIFOs at the paths
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=120) == 0  # SIGTERM still ends it (no SIGKILL needed)
    finally:
        served.kill()


async def test_a_tactic_answer_with_a_state_the_repl_never_allocated_poisons_it(tmp_path):
    log = tmp_path / "trapdoor.log"
    config = loopback_config(
        1, repl__command=[*TRAPDOOR, "foreign-state", f"log={log}"], sandbox__mode="off"
    )
    config.pool.max_retries = 1
    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        proof = await client.start_proof(AND_STATEMENT)
        try:
            result = await client.run_tactic(proof.states[0].state_id, "constructor")
        except ClientError as exc:
            result = exc
        # Never accepted as a new state: no state id comes back.
        assert isinstance(result, ClientError) or (
            result.status == "REJECTED" and not result.state_id
        ), result
        assert app.pool.stats.restarts["poisoned"] >= 1
        assert "foreign state" in log.read_text()
        assert (await client.server_info()).serving
    finally:
        await client.close()
        await app.stop(2.0)
