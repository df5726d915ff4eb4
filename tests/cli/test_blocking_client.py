"""The blocking Client: one private loop thread, shared by threads, usable inside a running loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cli_support import GOOD, Served
from leanrpc.client import Client, ClientError, resend_hint_s
from leanrpc.client._types import Result


@pytest.fixture(scope="module")
def server():
    served = Served()
    yield served
    served.stop()


def test_one_client_from_four_threads_at_once(server):
    barrier = threading.Barrier(4)
    with Client(server.address) as client:

        def work(n: int) -> list[str]:
            barrier.wait(timeout=30)  # all four calls are in flight together
            return [r.id for r in client.verify([(f"t{n}-{i}", GOOD) for i in range(5)])]

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(work, range(4)))
        assert answers == [[f"t{n}-{i}" for i in range(5)] for n in range(4)]
        statuses = {r.status for r in client.verify([GOOD] * 3)}
        assert statuses == {"VALID"}
    with pytest.raises(RuntimeError, match="closed"):
        client.verify([GOOD])


def test_inside_a_running_event_loop(server):
    async def notebook_cell() -> list[str]:
        # As in Jupyter: a loop is running in this thread, and the user calls
        # the blocking client; it must neither fail nor touch this loop.
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        with Client(server.address) as client:
            results = client.verify([GOOD, GOOD])
            info = client.server_info()
        task.cancel()
        assert info.serving
        return [r.status for r in results]

    assert asyncio.run(notebook_cell()) == ["VALID", "VALID"]


def test_closing_leaves_no_loop_thread():
    client = Client("127.0.0.1:1", max_retries=0)
    assert any(t.name == "leanrpc-client-loop" for t in threading.enumerate())
    with pytest.raises(ClientError) as info:
        client.verify_batch([GOOD], deadline_s=5)
    assert info.value.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    client.close()
    client.close()  # idempotent
    # (gRPC's own process-wide poller thread is not the client's.)
    assert not any(t.name == "leanrpc-client-loop" for t in threading.enumerate())


def _rejected(error: str, retry_after_s: float | None = None) -> Result:
    return Result(
        id="x",
        status="REJECTED",
        messages=[],
        sorries=[],
        error=error,
        time_total_s=0,
        time_queue_s=0,
        time_header_s=0,
        time_body_s=0,
        time_boot_s=0,
        warm_header=False,
        reused_prefix_chars=0,
        attempts=0,
        verifier="",
        verifier_description="",
        retry_after_s=retry_after_s,
    )


def test_refused_unrun_snippets_are_resendable_and_others_are_final():
    # Only the structured hint (Result.retry_after) makes a result re-sendable;
    # the words of the error are for people.
    assert resend_hint_s(_rejected("RESOURCE_EXHAUSTED: queue full (100 queued)", 0.25)) == 0.25
    assert resend_hint_s(_rejected("server shutting down", 1.5)) == 1.5
    assert resend_hint_s(_rejected("server shutting down", 0.0)) == 0.0
    assert resend_hint_s(_rejected("server shutting down; retry after 1500 ms")) is None
    assert resend_hint_s(_rejected("unknown session s1")) is None
    done = _rejected("server shutting down", 0.005)
    done.status = "INVALID"
    assert resend_hint_s(done) is None
