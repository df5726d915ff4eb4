"""FormalizeService sessions and the gRPC Formalizer servicer (scripted generator, in-process server)."""

import asyncio

import grpc
import pytest

from formalize_support import GOOD, FakeVerify, ScriptedGenerator, collect
from leanrpc.edge.formalizer import (
    FormalizerServicer,
    add_formalizer_to_server,
    event_to_pb,
    formalize_config_from,
    request_from_pb,
)
from leanrpc.errors import ModelNotConfigured, RequestError
from leanrpc.formalize.config import FormalizeConfig
from leanrpc.formalize.types import (
    FormalizeEvent,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    TokenChunk,
)
from leanrpc.services.formalize import NOT_CONFIGURED, FormalizeService
from leanrpc.v1 import formalizer_pb2 as pb
from leanrpc.v1 import formalizer_pb2_grpc, verifier_pb2


def outcomes(events):
    return {e.job_id: e.payload for e in events if isinstance(e.payload, Outcome)}


class TestService:
    def test_not_serving_without_weights(self, config):
        svc = FormalizeService.from_config(config, FakeVerify())
        assert svc.serving_status() == (False, NOT_CONFIGURED)
        with pytest.raises(ModelNotConfigured, match="no model weights configured"):
            svc.open_session()

    def test_not_serving_with_broken_model_dir(self, tmp_path):
        cfg = FormalizeConfig(model_dir=str(tmp_path / "missing"), mathlib_names_path=None)
        ok, reason = FormalizeService.from_config(cfg, FakeVerify()).serving_status()
        assert not ok and "missing" in reason and "not a directory" in reason

    def test_invalid_config_raises(self):
        with pytest.raises(ValueError):
            FormalizeService.from_config(FormalizeConfig(device="tpu"), FakeVerify())

    async def test_session_runs_jobs_concurrently(self, config):
        gen = ScriptedGenerator([GOOD], chunk=4, delay=0.001)
        svc = FormalizeService(gen, FakeVerify(delay=0.01), config)
        assert svc.serving_status() == (True, "")
        session = svc.open_session()
        for i in range(4):
            session.submit(
                FormalizeRequest(id=f"j{i}", informal_statement="2+2=4", stream_tokens=True)
            )
        session.end_input()
        events = await asyncio.wait_for(collect(session.events()), 5)
        outs = outcomes(events)
        assert set(outs) == {"j0", "j1", "j2", "j3"}
        assert all(o.status == OutcomeStatus.FORMALIZED for o in outs.values())
        # interleaved: job j3's tokens start before job j0's outcome
        order = [(e.job_id, type(e.payload).__name__) for e in events]
        assert order.index(("j3", "TokenChunk")) < order.index(("j0", "Outcome"))
        # each job's outcome is its last event
        for jid in outs:
            assert [e for e in events if e.job_id == jid][-1].payload is outs[jid]
        await svc.close()
        assert svc.serving_status() == (False, "Formalize: shutting down")

    async def test_duplicate_and_empty_ids(self, config):
        svc = FormalizeService(ScriptedGenerator([GOOD], delay=0.01), FakeVerify(), config)
        session = svc.open_session()
        session.submit(FormalizeRequest(id="a", informal_statement="x"))
        with pytest.raises(RequestError, match="already in flight"):
            session.submit(FormalizeRequest(id="a", informal_statement="x"))
        with pytest.raises(RequestError, match="id is required"):
            session.submit(FormalizeRequest(id="", informal_statement="x"))
        session.end_input()
        await collect(session.events())
        session2 = svc.open_session()
        session2.submit(
            FormalizeRequest(id="a", informal_statement="x")
        )  # reuse after it finished is fine
        await session2.aclose()

    async def test_cancel_one_job(self, config):
        gen = ScriptedGenerator([GOOD * 40], chunk=2, delay=0.002)
        svc = FormalizeService(gen, FakeVerify(), config)
        session = svc.open_session()
        session.submit(FormalizeRequest(id="slow", informal_statement="x", stream_tokens=True))
        session.end_input()
        events = []
        async for ev in session.events():
            events.append(ev)
            if isinstance(ev.payload, TokenChunk) and len(events) == 2:
                assert session.cancel("slow")
                assert not session.cancel("nope")
        assert outcomes(events)["slow"].status == OutcomeStatus.CANCELLED
        assert gen.streams[0].emitted_chunks < 8

    async def test_aclose_cancels_everything(self, config):
        gen = ScriptedGenerator([GOOD * 100], chunk=1, delay=0.005)
        svc = FormalizeService(gen, FakeVerify(), config)
        session = svc.open_session()
        for i in range(3):
            session.submit(FormalizeRequest(id=f"j{i}", informal_statement="x"))
        await asyncio.sleep(0.05)
        await asyncio.wait_for(session.aclose(), 2)
        assert all(s._cancel for s in gen.streams)
        assert session.in_flight == 0

    async def test_single_job_api(self, config):
        svc = FormalizeService(ScriptedGenerator([GOOD]), FakeVerify(), config)
        events = await collect(svc.formalize(FormalizeRequest(id="x", informal_statement="2+2=4")))
        assert events[-1].status == OutcomeStatus.FORMALIZED

    async def test_start_loading_without_weights(self, config):
        svc = FormalizeService.start_loading(config, FakeVerify())
        assert await svc.wait_loaded(1)
        assert svc.serving_status() == (False, NOT_CONFIGURED)


class TestConversion:
    def test_request_from_pb(self):
        msg = pb.FormalizeRequest(
            id="q",
            informal_statement="s",
            header="import Mathlib",
            max_iterations=3,
            sampling=pb.SamplingOptions(temperature=0.5, top_p=0.9, max_new_tokens=9, seed=4),
            stream_tokens=True,
            retrieval=True,
        )
        r = request_from_pb(msg)
        assert (r.id, r.max_iterations, r.stream_tokens, r.retrieval) == ("q", 3, True, True)
        assert r.sampling.max_new_tokens == 9 and r.sampling.seed == 4
        assert r.sampling.temperature == pytest.approx(0.5)

    def test_config_from_server_section(self):
        class Section:
            model_dir = ""
            adapter_dirs = ("a", "b")
            device = "cpu"
            quantize = False
            max_batch = 3
            max_new_tokens = 99
            default_header = "import Mathlib\nopen Real"
            unrelated = 1

        cfg = formalize_config_from(Section())
        assert cfg.model_dir is None and cfg.adapter_dirs == ["a", "b"] and cfg.max_batch == 3
        assert cfg.default_header.endswith("open Real") and cfg.quantize is False

    def test_outcome_to_pb(self):
        ev = event_to_pb(
            FormalizeEvent("j", Outcome(OutcomeStatus.EXHAUSTED, 5, error="e", generated_tokens=7))
        )
        assert ev.id == "j" and ev.WhichOneof("kind") == "outcome"
        assert (
            ev.outcome.status == pb.FORMALIZE_OUTCOME_STATUS_EXHAUSTED
            and ev.outcome.iterations == 5
            and ev.outcome.generated_tokens == 7
        )


@pytest.fixture
async def grpc_channel_factory():
    servers = []

    async def make(service):
        server = grpc.aio.server()
        formalizer_pb2_grpc.add_FormalizerServicer_to_server(FormalizerServicer(service), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        servers.append((server, channel))
        return formalizer_pb2_grpc.FormalizerStub(channel)

    yield make
    for server, channel in servers:
        await channel.close()
        await server.stop(None)


def client_request(id_, text="Two plus two is four.", **kw):
    return pb.FormalizeClientMessage(
        request=pb.FormalizeRequest(id=id_, informal_statement=text, **kw)
    )


class TestGrpc:
    async def test_formalize_stream(self, grpc_channel_factory, config):
        gen = ScriptedGenerator(["theorem x : (2 : ℕ) + 2 = 5 := by sorry", GOOD])
        verify = FakeVerify(script=[__import__("formalize_support").error_result("type mismatch")])
        stub = await grpc_channel_factory(FormalizeService(gen, verify, config))

        async def requests():
            yield client_request("a", stream_tokens=True)

        events = [ev async for ev in stub.Formalize(requests())]
        kinds = [ev.WhichOneof("kind") for ev in events]
        assert kinds[0] == "token" and kinds[-1] == "outcome" and kinds.count("candidate") == 2
        cands = [ev.candidate for ev in events if ev.HasField("candidate")]
        assert cands[0].verify_result.status == verifier_pb2.STATUS_INVALID
        assert (
            cands[0].well_formed.ok and cands[1].verify_result.status == verifier_pb2.STATUS_SORRY
        )
        out = events[-1].outcome
        assert (
            out.status == pb.FORMALIZE_OUTCOME_STATUS_FORMALIZED
            and out.iterations == 2
            and out.lean_statement == GOOD
        )
        assert all(ev.id == "a" for ev in events)

    async def test_not_serving_is_failed_precondition(self, grpc_channel_factory, config):
        stub = await grpc_channel_factory(FormalizeService(None, FakeVerify(), config))

        async def requests():
            yield client_request("a")

        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Formalize(requests()):
                pass
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "no model weights configured" in err.value.details()

    async def test_duplicate_id_is_invalid_argument(self, grpc_channel_factory, config):
        stub = await grpc_channel_factory(
            FormalizeService(ScriptedGenerator([GOOD], delay=0.05), FakeVerify(), config)
        )

        async def requests():
            yield client_request("a")
            yield client_request("a")

        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Formalize(requests()):
                pass
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    async def test_cancel_id(self, grpc_channel_factory, config):
        gen = ScriptedGenerator([GOOD * 200, GOOD], chunk=1, delay=0.002)
        stub = await grpc_channel_factory(FormalizeService(gen, FakeVerify(), config))
        cancel_now = asyncio.Event()

        async def requests():
            yield client_request("slow", stream_tokens=True)
            yield client_request("fast")
            await cancel_now.wait()
            yield pb.FormalizeClientMessage(cancel_id="slow")

        events = []
        call = stub.Formalize(requests())
        async for ev in call:
            events.append(ev)
            if ev.id == "slow" and ev.HasField("token") and not cancel_now.is_set():
                cancel_now.set()
        outs = {ev.id: ev.outcome for ev in events if ev.HasField("outcome")}
        assert outs["slow"].status == pb.FORMALIZE_OUTCOME_STATUS_CANCELLED
        assert outs["fast"].status == pb.FORMALIZE_OUTCOME_STATUS_FORMALIZED
        assert gen.streams[0].emitted_chunks < 100

    async def test_client_cancel_stops_generation(self, grpc_channel_factory, config):
        gen = ScriptedGenerator([GOOD * 200], chunk=1, delay=0.002)
        stub = await grpc_channel_factory(FormalizeService(gen, FakeVerify(), config))

        async def requests():
            yield client_request("a", stream_tokens=True)
            await asyncio.sleep(10)

        call = stub.Formalize(requests())
        n = 0
        async for ev in call:
            n += 1
            if n == 3:
                call.cancel()
                break
        for _ in range(100):
            if gen.streams and gen.streams[0]._cancel:
                break
            await asyncio.sleep(0.01)
        assert gen.streams[0]._cancel
        assert gen.streams[0].emitted_chunks < 50

    async def test_add_formalizer_to_server_without_weights(self, config):
        class ServerConfig:
            formalize = config

        server = grpc.aio.server()
        svc = add_formalizer_to_server(server, ServerConfig(), verify_service=None)
        assert svc.serving_status() == (False, NOT_CONFIGURED)
        await server.stop(None)
