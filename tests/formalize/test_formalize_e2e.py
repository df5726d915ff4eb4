"""Formalizer through `create_server`: without a model, and with the tiny random-init one."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.app import FORMALIZER_SERVICE, VERIFIER_SERVICE, create_server
from leanrpc.config import Config
from leanrpc.services.formalize import NOT_CONFIGURED
from leanrpc.v1 import formalizer_pb2 as fpb
from leanrpc.v1 import formalizer_pb2_grpc, verifier_pb2_grpc
from leanrpc.v1 import verifier_pb2 as vpb

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _config(**formalize) -> Config:
    config = Config()
    config.server.port = 0
    config.pool.workers = 1
    config.pool.default_timeout_s = 20
    for key, value in formalize.items():
        setattr(config.formalize, key, value)
    return config


async def _health(channel, service: str):
    stub = health_pb2_grpc.HealthStub(channel)
    return (await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)).status


async def _wait_health(channel, service: str, want, timeout_s: float = 60.0):
    """Polls the health service until `service` reports `want` (the health loop publishes changes)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    status = await _health(channel, service)
    while status != want and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        status = await _health(channel, service)
    return status


def _request(job_id: str, **fields) -> fpb.FormalizeClientMessage:
    return fpb.FormalizeClientMessage(
        request=fpb.FormalizeRequest(id=job_id, informal_statement="2 + 2 = 4", **fields)
    )


async def test_no_model_formalizer_refuses_verifier_serves():
    app = await create_server(_config())
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        call = formalizer_pb2_grpc.FormalizerStub(channel).Formalize(timeout=30)
        await call.write(_request("j1"))
        await call.done_writing()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _event in call:
                pass
        assert info.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert NOT_CONFIGURED in info.value.details()

        assert await _health(channel, FORMALIZER_SERVICE) == NOT_SERVING
        # The Verifier turns SERVING once a stand-in worker has booted (seconds on a loaded box).
        assert await _wait_health(channel, VERIFIER_SERVICE, SERVING) == SERVING
        assert await _wait_health(channel, "", SERVING) == SERVING
        assert await _health(channel, FORMALIZER_SERVICE) == NOT_SERVING
        verifier = verifier_pb2_grpc.VerifierStub(channel)
        info = await verifier.GetServerInfo(vpb.GetServerInfoRequest(), timeout=10)
        assert info.serving and info.verifier.kind == "stand-in"
        reply = await verifier.Verify(
            vpb.VerifyRequest(snippets=[vpb.Snippet(code="example : True := trivial")]), timeout=30
        )
        assert reply.results[0].status == vpb.STATUS_VALID
    finally:
        await channel.close()
        await app.stop(2.0)


@pytest.mark.model
async def test_tiny_model_formalizes_through_the_server(tiny_dir):
    app = await create_server(
        _config(
            model_dir=str(tiny_dir),
            device="cpu",
            max_batch=2,
            max_new_tokens=12,
            mathlib_names_path="",
        )
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        assert await asyncio.wait_for(app.formalize.wait_loaded(), 120)
        assert app.formalize.serving_status() == (True, "")
        assert await _wait_health(channel, FORMALIZER_SERVICE, SERVING) == SERVING

        call = formalizer_pb2_grpc.FormalizerStub(channel).Formalize(timeout=120)
        sampling = fpb.SamplingOptions(max_new_tokens=8, seed=1)
        await call.write(_request("a", max_iterations=2, stream_tokens=True, sampling=sampling))
        await call.write(_request("b", max_iterations=1, sampling=sampling))
        await call.done_writing()
        events: dict[str, list] = {"a": [], "b": []}
        async for event in call:
            events[event.id].append(event)
        assert await call.code() is grpc.StatusCode.OK

        for job_id, rounds in (("a", 2), ("b", 1)):
            kinds = [e.WhichOneof("kind") for e in events[job_id]]
            assert kinds[-1] == "outcome" and kinds.count("outcome") == 1, kinds
            outcome = events[job_id][-1].outcome
            candidates = [
                e.candidate for e in events[job_id] if e.WhichOneof("kind") == "candidate"
            ]
            assert outcome.status in (
                fpb.FORMALIZE_OUTCOME_STATUS_FORMALIZED,
                fpb.FORMALIZE_OUTCOME_STATUS_EXHAUSTED,
            ), outcome
            assert len(candidates) == outcome.iterations and 1 <= outcome.iterations <= rounds
            assert [c.iteration for c in candidates] == list(range(1, outcome.iterations + 1))
            assert (
                0 < outcome.elapsed.ToTimedelta().total_seconds()
                and outcome.budget.seconds == 600
                and not outcome.budget_exhausted
            )
            assert 0 < outcome.generated_tokens <= 8 * outcome.iterations
            for candidate in candidates:
                # Verified only when well formed and new; then by the stand-in.
                assert candidate.HasField("verify_result") == (
                    candidate.well_formed.ok and not candidate.duplicate_of
                )
                if candidate.well_formed.ok:
                    assert candidate.verify_result.verifier.kind == "stand-in"
        assert any(e.WhichOneof("kind") == "token" for e in events["a"])
        assert not any(e.WhichOneof("kind") == "token" for e in events["b"])

        stub = formalizer_pb2_grpc.FormalizerStub(channel)
        info = await stub.GetFormalizerInfo(fpb.FormalizerInfoRequest(), timeout=10)
        assert list(info.adapters) == [] and info.quantized and info.grouped_dispatch_layers == 2
        assert info.job_budget.seconds == 600 and info.stream_budget.ToNanoseconds() == 0
        # k = 2 candidates per round, sampled in one batch
        call = stub.Formalize(timeout=120)
        await call.write(
            _request(
                "k",
                max_iterations=1,
                candidates=2,
                sampling=fpb.SamplingOptions(max_new_tokens=6, seed=3, temperature=0.9),
            )
        )
        await call.done_writing()
        got = [e async for e in call]
        assert [e.candidate.index for e in got if e.WhichOneof("kind") == "candidate"] == [0, 1]
        assert got[-1].WhichOneof("kind") == "outcome"
        # an unknown adapter fails the stream with INVALID_ARGUMENT
        call = stub.Formalize(timeout=30)
        await call.write(_request("u", adapter="gamma"))
        await call.done_writing()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in call:
                pass
        assert (
            err.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "gamma" in err.value.details()
        )
    finally:
        await channel.close()
        await app.stop(2.0)
