"""One identity everywhere (issue 26 item 4): every door names its caller by
edge/identity.py, passes it down to Verify, and refuses an unauthenticated
call UNAUTHENTICATED on every RPC kind, every time."""

from __future__ import annotations

import collections

import grpc

from leanrpc.client import AsyncClient, Client, ClientError
from leanrpc.edge.identity import CallerIdentity
from leanrpc.v1 import prover_pb2 as ppb
from leanrpc.v1 import prover_pb2_grpc as ppb_grpc
from leanrpc.v1 import verifier_pb2 as pb
from security_support import HEADER, bearer, make_config, one_snippet, running_server, stub

CODE = HEADER + "theorem t : 1 = 1 := rfl\n"
GOOD = "tok-identity-1"
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED


async def _code(call) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def _streamed(call, requests) -> grpc.StatusCode:
    """Writes every request while the server may already be refusing, then reads."""
    try:
        for request in requests:
            await call.write(request)
        await call.done_writing()
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return await call.code()


async def test_40_unauthenticated_verify_streams_are_40_unauthenticated(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(server__auth_tokens=[GOOD])) as app:
        address = f"127.0.0.1:{app.port}"
        codes: collections.Counter = collections.Counter()
        for token in [None, "wrong"] * 20:
            # The client writes its options and snippets while the refusal comes back.
            async with AsyncClient(address, token=token, max_retries=0) as client:
                try:
                    await client.verify([CODE] * 5)
                    codes["OK"] += 1
                except ClientError as exc:
                    codes[exc.code.name] += 1
        assert codes == {"UNAUTHENTICATED": 40}


def test_the_blocking_client_stream_is_unauthenticated_every_time(monkeypatch):
    import asyncio
    import threading

    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    ready, stop = threading.Event(), None
    holder: dict = {}

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with running_server(make_config(server__auth_tokens=[GOOD])) as app:
            holder["port"] = app.port
            ready.set()
            await stop.wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    try:
        assert ready.wait(60)
        codes: collections.Counter = collections.Counter()
        for _ in range(20):  # the CLI's path: the blocking client over VerifyStream
            with Client(f"127.0.0.1:{holder['port']}", max_retries=0) as client:
                try:
                    client.verify([CODE] * 5)
                    codes["OK"] += 1
                except ClientError as exc:
                    codes[exc.code.name] += 1
        assert codes == {"UNAUTHENTICATED": 20}
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()


async def test_every_rpc_kind_is_unauthenticated_without_a_token(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(server__auth_tokens=[GOOD])) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier, prover = stub(channel), ppb_grpc.ProverStub(channel)
            for metadata in ((), bearer("wrong")):
                unary = [
                    verifier.Verify(one_snippet(CODE), metadata=metadata),
                    verifier.Extract(pb.ExtractRequest(code=CODE), metadata=metadata),
                    verifier.OpenSession(pb.OpenSessionRequest(code=HEADER), metadata=metadata),
                    verifier.RunInSession(
                        pb.RunInSessionRequest(session="x", code="#check 1"), metadata=metadata
                    ),
                    verifier.CloseSession(pb.CloseSessionRequest(session="x"), metadata=metadata),
                    prover.StartProof(ppb.StartProofRequest(code=CODE), metadata=metadata),
                    prover.RunTactic(
                        ppb.RunTacticRequest(state_id="s", tactic="rfl"), metadata=metadata
                    ),
                    prover.ReleaseStates(
                        ppb.ReleaseStatesRequest(state_ids=["s"]), metadata=metadata
                    ),
                ]
                assert [await _code(call) for call in unary] == [UNAUTHENTICATED] * len(unary)
                for _ in range(10):
                    snippets = [
                        pb.VerifyStreamRequest(snippet=pb.Snippet(id=str(n), code=CODE))
                        for n in range(20)
                    ]
                    assert (
                        await _streamed(verifier.VerifyStream(metadata=metadata), snippets)
                        == UNAUTHENTICATED
                    )
                    pairs = [
                        ppb.ExpandRequest(request_id=str(n), state_id="s", tactic="rfl")
                        for n in range(20)
                    ]
                    assert (
                        await _streamed(prover.Expand(metadata=metadata), pairs) == UNAUTHENTICATED
                    )
            # The same calls with the token get in.
            admitted = await verifier.Verify(one_snippet(CODE), metadata=bearer(GOOD))
            assert admitted.results[0].status == pb.STATUS_VALID


class _Spy:
    """Records the `client_id` each resolved Verify request names (wraps `run`)."""

    def __init__(self, verify) -> None:
        self.clients: list[str] = []
        self._run = verify.run
        verify.run = self

    async def __call__(self, request):
        self.clients.append(request.client_id)
        return await self._run(request)


async def test_verify_extract_and_the_prover_check_pass_the_callers_identity(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(server__auth_tokens=[GOOD])) as app:
        spy = _Spy(app.verify)
        caller = CallerIdentity(tokens_checked=True).of_metadata(bearer(GOOD), "ipv4:127.0.0.1:1")
        async with AsyncClient(f"127.0.0.1:{app.port}", token=GOOD, max_retries=0) as client:
            await client.verify_batch([CODE])
            await client.verify([CODE])
            await client.extract(CODE)
            proof = await client.start_proof(
                "theorem and_intro_t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
            )
            step = await client.run_tactic(proof.states[0].state_id, "constructor")
            step = await client.run_tactic(step.state_id, "exact hp")
            done = await client.run_tactic(step.state_id, "exact hq")
            assert done.status == "COMPLETED"  # its whole-proof check went through Verify
        assert len(spy.clients) == 4 and set(spy.clients) == {caller}
        assert caller.startswith("token:")


async def test_with_auth_off_a_made_up_bearer_is_the_peer_at_every_door(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config()) as app:
        spy = _Spy(app.verify)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            for n in range(3):
                await verifier.Verify(one_snippet(CODE), metadata=bearer(f"made-up-{n}"))
                await verifier.Extract(
                    pb.ExtractRequest(code=CODE), metadata=bearer(f"made-up-{n}")
                )
        assert spy.clients == ["peer:ipv4:127.0.0.1"] * 6
