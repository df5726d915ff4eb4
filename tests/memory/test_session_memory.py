"""Issue 44 item 2 over real sockets, against a server in its own process:
session code is charged what the server really holds for it (RSS growth within
1.5x of the charge, for ASCII and for 4-byte characters), and a server-wide cap
beside the per-client one holds 3 clients that each fill their own."""

from __future__ import annotations

import grpc
import pytest

from benchmarks.memproc import ServerProcess, mb
from leanrpc.client import AsyncClient, ClientError
from leanrpc.pool import held_cost

OPENING = "import Mathlib\n\ntheorem t0 : True := trivial\n"
SETTINGS = {"server.max_code_chars": 2_000_000}


def _command(n: int, char: str) -> str:
    """About 1 MB of UTF-8: a comment of `char`s."""
    return f"theorem c{n} : True := trivial\n-- " + char * (2**20 // len(char.encode())) + "\n"


async def _fill(address: str, token: str, char: str) -> tuple[int, str]:
    """Opens a session and records commands until refused: (bytes charged, refusal)."""
    client = AsyncClient(address, token=token, max_retries=0)
    try:
        opened = await client.open_session(OPENING, check_axioms=False)
        charged = held_cost(OPENING)
        for n in range(10_000):
            text = _command(n, char)
            try:
                await client.run_in_session(opened.session, text, check_axioms=False)
            except ClientError as exc:
                assert exc.code is grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                return charged, str(exc)
            charged += held_cost(text)
        raise AssertionError("never refused")
    finally:
        await client.close()


@pytest.mark.parametrize("char", ["a", "😀"], ids=["ascii", "4-byte"])
async def test_session_code_is_charged_what_the_server_really_holds(char):
    with ServerProcess({**SETTINGS, "sessions.max_mb_per_client": 64}) as server:
        before = server.reset_peak()
        charged, refusal = await _fill(server.grpc, "memory-test-token", char)
        growth = server.peak() - before  # the most it held, transient copies included
        assert "sessions.max_mb_per_client" in refusal, refusal
        assert 56 * 2**20 < charged <= 64 * 2**20
        print(f"{char!r}: charged {mb(charged):.0f} MB, RSS grew {mb(growth):.0f} MB")
        assert charged / 1.5 <= growth <= 1.5 * charged, (mb(charged), mb(growth))


async def test_three_clients_filling_their_sessions_stay_under_the_server_wide_cap():
    tokens = ("tok-1", "tok-2", "tok-3")
    settings = {**SETTINGS, "sessions.max_mb_per_client": 48, "sessions.max_mb_total": 96}
    with ServerProcess(settings, tokens=tokens) as server:
        before = server.reset_peak()
        filled = [await _fill(server.grpc, token, "a") for token in tokens]
        growth = server.peak() - before
        print(f"charged {[round(mb(c)) for c, _ in filled]} MB, peak RSS grew {mb(growth):.0f} MB")
        assert "sessions.max_mb_per_client" in filled[0][1]
        assert "sessions.max_mb_total" in filled[-1][1]  # the last is told it is the server's cap
        assert sum(c for c, _ in filled) <= 96 * 2**20
        assert growth <= 1.5 * 96 * 2**20, mb(growth)
