"""Issue 44 item 2 for the Prover, over real sockets, against a server in its
own process: a proof's code and its tactic chain are charged what the server
really holds for them (RSS growth within 1.5x of the charge, for ASCII and for
4-byte characters), and a server-wide cap (`prover.max_mb_total`) beside the
per-client one holds 3 clients that each fill their own."""

from __future__ import annotations

import grpc
import pytest

from benchmarks.memproc import ServerProcess, mb
from leanrpc.client import AsyncClient, ClientError
from leanrpc.services.prover.registry import proof_bytes, tactic_bytes

STATEMENT = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  sorry\n"
SETTINGS = {"server.max_code_chars": 2_000_000, "prover.max_tactic_chars": 1_000_000}


def _code(n: int, char: str) -> str:
    """About 1 MB of UTF-8 before a statement left open with `sorry`."""
    return (
        f"theorem pad{n} : True := trivial\n-- "
        + char * (2**20 // len(char.encode()))
        + "\n\n"
        + STATEMENT
    )


def _tactic(char: str) -> str:
    """About 900 KB of UTF-8: a tactic that leaves the goal as it is."""
    return "skip -- " + char * (900_000 // len(char.encode()))


async def _fill(address: str, token: str, char: str, tactics: bool = False) -> tuple[int, str]:
    """Until refused: starts proofs of about 1 MB each, or (`tactics`) runs tactics of
    about 900 KB on the root state of one small proof, each giving a state of its
    own. (bytes charged, refusal). Not a chain: see docs/RELIABILITY.md, a deep
    chain of long tactics costs more in the pool's bounded prefix index."""
    client = AsyncClient(address, token=token, max_retries=0)
    charged = 0
    try:
        if tactics:
            started = await client.start_proof(STATEMENT, check_axioms=False)
            charged += proof_bytes(STATEMENT, STATEMENT)  # no header: the command is the code
            state = started.states[0].state_id
        for n in range(10_000):
            try:
                if tactics:
                    ran = await client.run_tactic(state, _tactic(char))
                    assert ran.status == "INCOMPLETE", ran.error
                    charged += tactic_bytes(_tactic(char))
                else:
                    code = _code(n, char)
                    await client.start_proof(code, check_axioms=False)
                    charged += proof_bytes(code, code)
            except ClientError as exc:
                assert exc.code is grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                return charged, str(exc)
        raise AssertionError("never refused")
    finally:
        await client.close()


@pytest.mark.parametrize("tactics", [False, True], ids=["proof-code", "tactics"])
@pytest.mark.parametrize("char", ["a", "😀"], ids=["ascii", "4-byte"])
async def test_proof_states_are_charged_what_the_server_really_holds(char, tactics):
    with ServerProcess({**SETTINGS, "prover.max_mb_per_client": 64}) as server:
        before = server.reset_peak()
        charged, refusal = await _fill(server.grpc, "memory-test-token", char, tactics)
        growth = server.peak() - before  # the most it held, transient copies included
        assert "prover.max_mb_per_client" in refusal, refusal
        assert 48 * 2**20 < charged <= 64 * 2**20, mb(charged)
        print(
            f"{char!r} tactics={tactics}: charged {mb(charged):.0f} MB, RSS grew {mb(growth):.0f} MB"
        )
        assert charged / 1.5 <= growth <= 1.5 * charged, (mb(charged), mb(growth))


async def test_three_clients_filling_their_proof_states_stay_under_the_server_wide_cap():
    tokens = ("tok-1", "tok-2", "tok-3")
    settings = {**SETTINGS, "prover.max_mb_per_client": 48, "prover.max_mb_total": 96}
    with ServerProcess(settings, tokens=tokens) as server:
        before = server.reset_peak()
        filled = [await _fill(server.grpc, token, "a") for token in tokens]
        growth = server.peak() - before
        print(f"charged {[round(mb(c)) for c, _ in filled]} MB, peak RSS grew {mb(growth):.0f} MB")
        assert "prover.max_mb_per_client" in filled[0][1]
        assert "prover.max_mb_total" in filled[-1][1]  # the last is told it is the server's cap
        assert sum(c for c, _ in filled) <= 96 * 2**20
        assert growth <= 1.5 * 96 * 2**20, mb(growth)
