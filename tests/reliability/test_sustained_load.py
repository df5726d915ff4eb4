"""Sustained load: 20,000 snippets, 2 workers, 64 concurrent VerifyStream streams."""

from __future__ import annotations

import gc

from reliability_support import (
    fd_baseline,
    open_fds,
    rss_mb,
    run_streams,
    snippet,
    start_app,
    wait_no_descendants,
)

TOTAL = 20_000


async def test_twenty_thousand_snippets_each_answered_once_with_flat_memory():
    fds_before = await fd_baseline()
    app = await start_app(workers=2)
    samples: dict[str, float] = {}

    def on_progress(answered: int) -> None:
        # After warm-up (a quarter of the run), then at the end.
        if answered == TOTAL // 4:
            gc.collect()
            samples["warm"] = rss_mb()

    try:
        items = []
        for i in range(TOTAL):
            code, expected = snippet("sorry" if i % 10 == 0 else "ok", i)
            items.append((f"s{i}", code, expected))
        report = await run_streams(app.port, items, streams=64, window=4, on_progress=on_progress)
        gc.collect()
        samples["end"] = rss_mb()
        assert report.stream_errors == []
        assert report.missing == 0 and report.duplicates == 0 and report.unknown == 0
        assert report.wrong == []
        assert report.statuses == {"VALID": TOTAL - TOTAL // 10, "SORRY": TOTAL // 10}
        stats = app.pool.stats
        assert stats.jobs_submitted == TOTAL == stats.jobs_finished
        assert app.pool.queue_depth == 0
        # Workers were recycled by request count (2000 each) along the way.
        assert stats.restarts["max_requests"] >= 4
        # No growth after warm-up: a leak of even 1 KB per request would add
        # 15 MB over the last 15,000.
        assert samples["end"] - samples["warm"] < 12, samples
    finally:
        await app.stop(2.0)
    await wait_no_descendants()
    # Worker pipes, pidfds and the server's sockets are all closed again.
    assert open_fds() <= fds_before
