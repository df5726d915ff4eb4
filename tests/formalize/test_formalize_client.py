"""The Python client's formalize() (async and blocking) against a real server with the tiny model.

The tiny random-init model writes noise, so the outcome is EXHAUSTED after the
iteration cap; what is checked is the client's contract: token and candidate events
while the job runs, exactly one FormalizeResult, last, matching the candidates.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.client import (
    AsyncClient,
    CandidateEvent,
    Client,
    ClientError,
    FormalizeResult,
    TokenEvent,
)
from testkit import loopback_config

pytestmark = pytest.mark.model


@pytest.fixture
async def address(tiny_dir):
    config = loopback_config(workers=1)
    config.formalize.model_dir = str(tiny_dir)
    config.formalize.device = "cpu"
    config.formalize.max_batch = 2
    config.formalize.max_new_tokens = 12
    config.formalize.mathlib_names_path = ""
    app = await create_server(config)
    try:
        assert await asyncio.wait_for(app.formalize.wait_loaded(), 120)
        yield f"127.0.0.1:{app.port}"
    finally:
        await app.stop(2.0)


def _check(events: list, rounds: int) -> FormalizeResult:
    assert isinstance(events[-1], FormalizeResult)
    assert sum(isinstance(e, FormalizeResult) for e in events) == 1
    result = events[-1]
    candidates = [e for e in events if isinstance(e, CandidateEvent)]
    assert result.status in ("FORMALIZED", "EXHAUSTED")
    assert len(candidates) == result.iterations and 1 <= result.iterations <= rounds
    assert [c.iteration for c in candidates] == list(range(1, result.iterations + 1))
    assert 0 < result.generated_tokens <= 8 * result.iterations and result.elapsed_s > 0
    for c in candidates:
        assert (c.verify_result is not None) == (c.well_formed and not c.duplicate_of)
    return result


async def test_async_formalize_streams_events_then_the_result(address):
    async with AsyncClient(address) as client:
        events = [
            e
            async for e in client.formalize_events(
                "Show that 2 + 2 = 4.",
                max_iterations=2,
                max_new_tokens=8,
                seed=1,
                stream_tokens=True,
            )
        ]
        _check(events, 2)
        assert any(isinstance(e, TokenEvent) for e in events)
        seen: list = []
        result = await client.formalize(
            "Show that 1 + 1 = 2.", max_iterations=1, max_new_tokens=8, on_event=seen.append
        )
        assert seen[-1] is result and result.iterations == 1
        assert not any(isinstance(e, TokenEvent) for e in seen)  # not asked for
        info = await client.formalizer_info()
        assert info.quantized and info.max_candidates >= 1
        with pytest.raises(ClientError) as err:  # an unknown adapter is the stream's error
            await client.formalize("x", adapter="no-such-adapter", max_iterations=1)
        assert err.value.code is grpc.StatusCode.INVALID_ARGUMENT


async def test_blocking_formalize(address):
    def run():
        with Client(address) as client:
            events = list(
                client.formalize_events("Show that 3 = 3.", max_iterations=1, max_new_tokens=8)
            )
            result = client.formalize("Show that 3 = 3.", max_iterations=1, max_new_tokens=8)
            return events, result

    events, result = await asyncio.to_thread(run)
    _check(events, 1)
    assert result.iterations == 1 and isinstance(result, FormalizeResult)
