"""Sessions and proof states belong to the identity that made them (issue 26 item 3).

Two clients with their own tokens, alice (A) and bob (B): B cannot run in,
verify in, close or overwrite A's session, nor expand or release A's proof
states; each time B sees exactly what a name never issued gives. One client
at its limits (sessions, bytes of session code, live proof states) leaves
the other's room untouched. With auth off, made-up bearer tokens are one
client (the peer), so they buy no extra proof-state quota.
"""

from __future__ import annotations

import grpc
import pytest

from leanrpc.client import AsyncClient, ClientError
from leanrpc.v1 import prover_pb2 as ppb
from leanrpc.v1 import prover_pb2_grpc as ppb_grpc
from security_support import HEADER, bearer, make_config, running_server

PREAMBLE = HEADER + "def double (n : Nat) : Nat := 2 * n\n"
AND_STATEMENT = "theorem and_intro_t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
TOKENS = ["alice-token-1", "bob-token-2"]


class _Two:
    def __init__(self, app) -> None:
        address = f"127.0.0.1:{app.port}"
        self.a = AsyncClient(address, token=TOKENS[0], max_retries=0)
        self.b = AsyncClient(address, token=TOKENS[1], max_retries=0)
        self.channel = grpc.aio.insecure_channel(address)
        self.prover = ppb_grpc.ProverStub(self.channel)

    async def close(self) -> None:
        await self.a.close()
        await self.b.close()
        await self.channel.close()


async def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(ClientError) as raised:
        await call
    return raised.value.code, raised.value.details


def _config(**overrides):
    return make_config(server__auth_tokens=TOKENS, **overrides)


async def test_another_client_cannot_run_verify_close_or_replace_a_session(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_config()) as app:
        two = _Two(app)
        try:
            assert (await two.a.open_session(PREAMBLE, name="proj")).env == 0
            # B on A's name: every call is what a name never opened gives.
            for name in ("proj", "never-opened"):
                code, details = await _refusal(
                    two.b.run_in_session(name, "theorem x : double 1 = 2 := by decide")
                )
                assert (code, details) == (
                    grpc.StatusCode.NOT_FOUND,
                    f"unknown session {name!r} (never opened, or closed)",
                )
                code, details = await _refusal(
                    two.b.verify_batch(["example : True := trivial"], session=name)
                )
                assert code == grpc.StatusCode.NOT_FOUND
                assert (
                    details == f"snippet 0 (0): unknown session {name!r} (never opened, or closed)"
                )
                [streamed] = await two.b.verify(["example : True := trivial"], session=name)
                assert streamed.status == "REJECTED"
                assert streamed.error == f"unknown session {name!r} (never opened, or closed)"
                assert await two.b.close_session(name) is False
            # B's own "proj" (say, with a planted declaration) is B's: A's "proj" does not see it.
            planted = await two.b.open_session(
                PREAMBLE + "def planted (n : Nat) : Nat := n\n", name="proj"
            )
            assert planted.session == "proj" and planted.env == 0
            [b_sees] = await two.b.verify_batch(["#check planted"], session="proj")
            [a_sees] = await two.a.verify_batch(["#check planted"], session="proj")
            assert any("planted (n : Nat) : Nat" in m.text for m in b_sees.messages)
            assert not any("planted (n : Nat)" in m.text for m in a_sees.messages)
            ran = await two.a.run_in_session("proj", "theorem d2 : double 2 = 4 := by decide")
            assert ran.env == 1 and ran.result.status == "VALID"
            assert await two.a.close_session("proj") is True
            assert await two.b.close_session("proj") is True
        finally:
            await two.close()


async def test_session_limits_are_per_client_and_names_cannot_be_guessed(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(
        _config(sessions__max_per_client=16, sessions__max_mb_per_client=4)
    ) as app:
        two = _Two(app)
        try:
            names = [(await two.b.open_session(PREAMBLE)).session for _ in range(16)]
            assert len(set(names)) == 16
            # secrets.token_urlsafe(12): 16 random characters after "s-", no counter.
            assert all(n.startswith("s-") and len(n) == 18 for n in names) and "s1" not in names
            code, details = await _refusal(two.b.open_session(PREAMBLE))
            assert (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED and "sessions.max_per_client" in details
            )
            mine = await two.a.open_session(PREAMBLE)  # B at 16 of 16; A is untouched
            assert mine.env == 0
            # Bytes held for session code, per client: 4 MB each; a 600 KB command holds
            # about 3 MB (pool/sessions.py held_cost), so a second one is over.
            big = "theorem big : 1 = 1 := rfl\n-- " + "x" * 600_000 + "\n"
            assert (await two.a.run_in_session(mine.session, big)).env == 1
            code, details = await _refusal(two.a.run_in_session(mine.session, big))
            assert (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED
                and "sessions.max_mb_per_client" in details
            )
            assert (await two.b.run_in_session(names[0], big)).env == 1  # B's room is B's
            # Verify in a session records nothing, so it is not limited by it.
            assert (await two.a.verify_batch(["example : True := trivial"], session=mine.session))[
                0
            ].status == "VALID"
            # Closing gives the room back.
            assert await two.a.close_session(mine.session)
            again = await two.a.open_session(PREAMBLE)
            assert (await two.a.run_in_session(again.session, big)).env == 1
        finally:
            await two.close()


async def test_another_client_cannot_expand_or_release_a_proof_state(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_config(prover__max_states_per_client=3)) as app:
        two = _Two(app)
        try:
            proof = await two.a.start_proof(AND_STATEMENT)
            [root] = proof.states
            assert len(root.state_id) > 16 and len(proof.proof_id) > 16  # random, not a counter
            for state_id in (root.state_id, "s-never-issued"):
                for _ in range(3):
                    code, details = await _refusal(two.b.run_tactic(state_id, "constructor"))
                    assert (code, details) == (
                        grpc.StatusCode.NOT_FOUND,
                        f"unknown proof state {state_id!r} "
                        "(never issued, released, or past its TTL)",
                    )
                [expanded] = [r async for r in two.b.expand([(state_id, "constructor")])]
                assert expanded.status == "REJECTED"
                assert expanded.error == (
                    f"NOT_FOUND: unknown proof state {state_id!r} "
                    "(never issued, released, or past its TTL)"
                )
                released = await two.prover.ReleaseStates(
                    ppb.ReleaseStatesRequest(
                        state_ids=[state_id],
                        proof_ids=[proof.proof_id if state_id == root.state_id else "p-never"],
                    ),
                    metadata=bearer(TOKENS[1]),
                )
                assert released.released == 0 and len(released.unknown) == 2
            # None of B's tries counted against A: A still has room for 2 more states.
            step = await two.a.run_tactic(root.state_id, "constructor")
            assert step.status == "INCOMPLETE"
            left = await two.a.run_tactic(step.state_id, "exact hp")
            assert left.status == "INCOMPLETE"
            code, details = await _refusal(two.a.run_tactic(left.state_id, "exact hq"))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED  # A's own 3 of 3
            # B fills its own quota; A's states still work once A frees room.
            other = await two.b.start_proof(AND_STATEMENT)
            assert other.states
            assert await two.a.release_states([step.state_id]) == 1
            done = await two.a.run_tactic(left.state_id, "exact hq")
            assert done.status == "COMPLETED", done.error
            assert await two.b.release_states([], [other.proof_id]) == 1
        finally:
            await two.close()


async def test_made_up_bearer_tokens_buy_no_proof_state_quota_with_auth_off(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(prover__max_states_per_client=3)) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            prover = ppb_grpc.ProverStub(channel)
            codes = []
            for n in range(6):
                try:
                    await prover.StartProof(
                        ppb.StartProofRequest(code=AND_STATEMENT), metadata=bearer(f"made-up-{n}")
                    )
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
            assert codes == [grpc.StatusCode.OK] * 3 + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 3


async def test_proof_memory_is_limited_per_client_and_failed_starts_hold_nothing(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(_config(prover__max_mb_per_client=1)) as app:
        two = _Two(app)
        try:
            padding = "\n-- " + "x" * 150_000 + "\n"
            # Starts that fail after reaching the REPL (a header that does not
            # load) keep nothing against the client: two of them would be over 1 MB.
            for _ in range(2):
                broken = "import NoSuchRoot.X\n\n" + AND_STATEMENT + " := by\n  sorry" + padding
                code, details = await _refusal(two.a.start_proof(broken))
                assert (
                    code == grpc.StatusCode.INVALID_ARGUMENT and "header failed to load" in details
                )
            held = await two.a.start_proof(
                AND_STATEMENT + " := by\n  sorry" + padding
            )  # ~600 KB charged: code + command, each 150 KB + a byte a character
            code, details = await _refusal(
                two.a.start_proof(AND_STATEMENT + " := by\n  sorry" + padding)
            )
            assert (
                code == grpc.StatusCode.RESOURCE_EXHAUSTED and "prover.max_mb_per_client" in details
            )
            other = await two.b.start_proof(
                AND_STATEMENT + " := by\n  sorry" + padding
            )  # B's room is B's
            assert other.states
            assert await two.a.release_states([], [held.proof_id]) == 1
            again = await two.a.start_proof(AND_STATEMENT + " := by\n  sorry" + padding)
            assert again.states
        finally:
            await two.close()


async def test_one_client_never_holds_every_session(monkeypatch, caplog):
    """Issue 43: with the total at 16 and the per-client limit (32) above it, one
    client took every session and the next got RESOURCE_EXHAUSTED. The
    per-client limit is clamped to half the total, and the clamp is logged."""
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    with caplog.at_level("WARNING", logger="leanrpc.pool"):
        server = running_server(_config(pool__max_sessions=16, sessions__max_per_client=32))
        async with server as app:
            assert "sessions.max_per_client = 32" in caplog.text and "using 8" in caplog.text
            two = _Two(app)
            try:
                for _ in range(8):
                    await two.a.open_session(PREAMBLE)
                code, details = await _refusal(two.a.open_session(PREAMBLE))
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "sessions.max_per_client" in details and "limit is 8" in details
                for _ in range(8):  # the other half is B's
                    assert (await two.b.open_session(PREAMBLE)).env == 0
            finally:
                await two.close()
