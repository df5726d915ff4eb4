"""Fair admission (issue 15 item 4): one client's big stream cannot starve
another client's single calls.

A stream of 3,000 snippets from client "big" fills the queue of a 2-worker
pool; client "small" sends 50 single calls one after another meanwhile.
Every snippet costs the same fixed REPL time (the stand-in burns 30 ms of
CPU per body). The small client never waits behind the big stream's queue:
between a small call's arrival in the queue and its dispatch, no job of the
big stream is dispatched (a client with nothing queued goes first, so it waits
for one running job at most). That is counted on the admission queue itself,
so machine load cannot move it; the latencies are printed. Once the small
client is done the pool closes, which answers the rest of the big stream
(NotServingError, safe to resend): every snippet still gets exactly one
answer, and the test does not wait for 3,000 bodies. Figures are in
docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from leanrpc.config import Config
from leanrpc.errors import NotServingError
from leanrpc.pool import Pool
from leanrpc.services.verify import VerifyOptions, VerifyService
from testkit import loopback_config

HEADER = "import Mathlib\n\n"
COST = "--@standin: burn=0.03\n"
BIG, SMALL = 3000, 50


def _code(tag: str, i: int) -> str:
    return f"{HEADER}theorem {tag}{i} (x : Nat) : x + {i} = x + {i} := by rfl\n{COST}"


class DispatchLog:
    """Records the admission queue's pushes and takes, in order."""

    def __init__(self, admission) -> None:
        self.events: list[tuple[str, str, str]] = []  # (push|take, client, job id)
        push, take = admission.push, admission.take

        def logged_push(ticket) -> None:
            self.events.append(("push", ticket.job.client_id, id(ticket)))
            push(ticket)

        def logged_take(ticket) -> None:
            self.events.append(("take", ticket.job.client_id, id(ticket)))
            take(ticket)

        admission.push, admission.take = logged_push, logged_take

    def overtaking(self, client: str) -> list[int]:
        """For each job of `client`: other clients' jobs dispatched while it was queued."""
        counts, waiting = [], {}
        for kind, who, job in self.events:
            if who == client:
                if kind == "push":
                    waiting[job] = 0
                elif job in waiting:
                    counts.append(waiting.pop(job))
            elif kind == "take":
                for queued in waiting:
                    waiting[queued] += 1
        return counts


async def _run(service: VerifyService) -> dict:
    options = VerifyOptions()
    log = DispatchLog(service.pool.admission)
    big = [
        asyncio.ensure_future(
            service.verify(
                f"big{i}", _code("big", i), options, client_id="big", stream_id="stream-1"
            )
        )
        for i in range(BIG)
    ]
    await asyncio.sleep(0.2)  # the stream is queued before the small client starts
    latencies = []
    small_results = []
    for i in range(SMALL):
        started = time.monotonic()
        result = await service.verify(
            f"small{i}", _code("small", i), options, client_id="small", stream_id=f"call-{i}"
        )
        latencies.append(time.monotonic() - started)
        small_results.append(result)
    queued_behind = service.info().queue_depth
    await service.pool.close()
    big_answers = await asyncio.gather(*big, return_exceptions=True)
    refused = [a for a in big_answers if isinstance(a, NotServingError)]
    results = [a for a in big_answers if not isinstance(a, BaseException)] + small_results
    latencies.sort()
    valid = [r for r in results if r.status.name == "VALID"]
    return {
        # Jobs running when the pool closed end as CRASH (their worker was stopped).
        "small_statuses": {r.status.name for r in small_results},
        "big_statuses": {r.status.name for r in results[: len(results) - SMALL]},
        "answers": len(results) + len(refused),
        "big_run": len(results) - SMALL,
        "mean_repl_s": statistics.fmean(r.timings.body_s for r in valid),
        "p50_s": latencies[len(latencies) // 2],
        "p99_s": statistics.quantiles(latencies, n=100, method="inclusive")[98],
        "max_s": latencies[-1],
        "queued_behind": queued_behind,
        "overtaken_by": log.overtaking("small"),
    }


async def _service() -> VerifyService:
    config: Config = loopback_config(2, pool__min_warm=2, pool__default_timeout_s=120)
    pool = Pool(config)
    await pool.start()
    return VerifyService(pool, config)


async def test_a_small_client_is_not_starved_by_a_big_stream():
    service = await _service()
    try:
        # Warm the header on both workers so the run measures bodies only.
        await asyncio.gather(
            *(service.verify(f"w{i}", _code("warm", i), VerifyOptions()) for i in range(4))
        )
        figures = await _run(service)
    finally:
        await service.pool.close()
    print(f"\nfair admission: {figures}")
    assert figures["small_statuses"] == {"VALID"}
    assert figures["big_statuses"] <= {"VALID", "CRASH"}
    assert figures["answers"] == BIG + SMALL, "every snippet answered once"
    assert figures["queued_behind"] > 0, (
        "the big stream was still queued while the small client ran"
    )
    assert len(figures["overtaken_by"]) == SMALL, "every small call was queued and dispatched once"
    assert max(figures["overtaken_by"]) == 0, figures["overtaken_by"]
