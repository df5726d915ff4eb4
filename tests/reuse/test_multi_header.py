"""Workers that hold several headers (issue 19 item 4): a job of a new header
runs on an idle worker that imports it in-process (same process, no restart);
a worker is recycled when memory says so, not on a header switch. Real pool,
real stand-in processes."""

from __future__ import annotations

from leanrpc.core.headers import split_header
from leanrpc.pool import Pool
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions, VerifyService
from reuse_support import make_config, standin_command

HEADERS = ["import Mathlib", "import Mathlib.Tactic", "import Mathlib.Data.Nat.Basic"]


def snippet_of(header: str, i: int = 0) -> str:
    return f"{header}\n\ntheorem t{i} : {i} + 1 = {i + 1} := rfl\n"


def snippet(i: int) -> str:
    return snippet_of(HEADERS[i % 3], i)


async def run_alternating(config, n: int = 9):
    pool = Pool(config)
    await pool.start()
    service = VerifyService(pool, config)
    pids, statuses = set(), []
    try:
        for i in range(n):
            result = await service.verify(f"s{i}", snippet(i), VerifyOptions())
            statuses.append(result.status)
            pids.update(w.pid for w in pool.workers if w.alive)
        return pool, pids, statuses
    finally:
        await pool.close(2.0)


async def test_one_worker_keeps_three_headers_in_one_process():
    config = make_config(
        workers=1,
        command=standin_command("--fork", "--import-cost", "0.05", "--reimport-cost", "0.05"),
    )
    pool, pids, statuses = await run_alternating(config)
    assert statuses == [Status.VALID] * 9
    assert len(pids) == 1  # never restarted
    assert pool.stats.header_imports == 2  # headers 2 and 3 imported next to the first
    assert pool.stats.header_loads == 3 and pool.stats.header_switches == 0
    assert "header_switch" not in pool.stats.restarts
    # Each import was measured (routing weighs waiting for a holder against it): at
    # least the 0.05 s of CPU the stand-in burns for it.
    for header in HEADERS:
        measured = pool.header_cost.seconds(split_header(snippet_of(header)).import_key)
        assert measured is not None and measured >= 0.05, (header, measured)


async def test_one_header_per_worker_when_configured_so():
    config = make_config(workers=1, pool__max_headers_per_worker=1)
    pool, pids, statuses = await run_alternating(config, n=4)
    assert statuses == [Status.VALID] * 4
    assert pool.stats.header_switches == 3 and pool.stats.header_imports == 0
    assert len(pids) == 4


async def test_memory_not_the_switch_decides_when_a_new_process_is_needed():
    # Stand-in: the first Mathlib header takes 200 MB, each later one 200 MB
    # more. Under a 600 MB limit a worker holding one header (~260 MB) may
    # import a second; holding two (~460 MB) it may not, so the third header
    # starts a new process (a switch), and no worker is ever killed for memory.
    command = standin_command("--fork", "--base-memory-mb", "200", "--header-memory-mb", "200")
    config = make_config(workers=1, command=command, limits__max_worker_rss_mb=600)
    pool, pids, statuses = await run_alternating(config, n=3)
    assert statuses == [Status.VALID] * 3
    assert pool.stats.header_imports == 1
    assert pool.stats.header_switches == 1
    assert "out_of_memory" not in pool.stats.restarts
    assert len(pids) == 2
