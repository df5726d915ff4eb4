"""Faults under sustained load: kill -9 every second, OOM balloons, hangs,
garbage output and stderr floods mixed into 20,000 snippets."""

from __future__ import annotations

from reliability_support import WorkerKiller, run_streams, snippet, start_app, wait_no_descendants

TOTAL = 20_000
# Spread evenly through the run: (kind, how many).
FAULT_MIX = {"hang": 8, "oom": 8, "garbage": 12, "stderr": 40}
MAX_RETRIES = 1


def build_items(total: int, mix: dict[str, int]) -> tuple[list, dict[str, str]]:
    kinds = ["ok"] * total
    slot = 7
    for kind, count in mix.items():
        for _ in range(count):
            kinds[slot % total] = kind
            slot += total // sum(mix.values()) + 1
    items, kind_of = [], {}
    for i, kind in enumerate(kinds):
        code, expected = snippet(kind, i)
        sid = f"{kind}-{i}"
        # A kill -9 can land on any attempt; once retries are spent the
        # correct answer is CRASH.
        items.append((sid, code, expected | {"CRASH"}))
        kind_of[sid] = kind
    return items, kind_of


async def test_faults_under_load_lose_nothing_and_answer_correctly():
    app = await start_app(
        workers=2,
        limits__max_worker_rss_mb=300,
        limits__memory_poll_s=0.05,
        pool__max_retries=MAX_RETRIES,
    )
    killer = WorkerKiller(app, period=1.0)
    try:
        items, kind_of = build_items(TOTAL, FAULT_MIX)
        killer.start()
        report = await run_streams(app.port, items, streams=64, window=4, timeout_s=1.0)
        await killer.stop()
        assert report.stream_errors == []
        assert report.missing == 0 and report.duplicates == 0 and report.unknown == 0
        assert report.wrong == [], report.wrong[:5]

        # Per snippet, the status was in its kind's expected set (report.wrong
        # is empty); now the aggregate figures.
        statuses = report.statuses
        assert killer.kills >= 5
        # Each fault kind produced its own status at least once.
        assert statuses["TIMEOUT"] >= 1 and statuses["OUT_OF_MEMORY"] >= 1
        # A non-garbage snippet ends CRASH only if every attempt was killed.
        unexplained = statuses["CRASH"] - FAULT_MIX["garbage"]
        assert unexplained * (MAX_RETRIES + 1) <= killer.kills, (statuses, killer.kills)
        stats = app.pool.stats
        assert stats.jobs_submitted == stats.jobs_finished
        assert stats.restarts["crash"] >= 1 and stats.restarts["garbage"] >= FAULT_MIX["garbage"]
        assert stats.restarts["stderr"] >= 1
        # The server still answers a plain request.
        code, _ = snippet("ok", 0)
        after = await run_streams(app.port, [("after", code, {"VALID"})], streams=1)
        assert after.statuses == {"VALID": 1}
    finally:
        await killer.stop()
        await app.stop(2.0)
    await wait_no_descendants()
