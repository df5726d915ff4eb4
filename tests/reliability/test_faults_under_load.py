"""Faults under sustained load: kill -9 every second, OOM balloons, hangs,
garbage output and stderr floods mixed into 20,000 snippets."""

from __future__ import annotations

from reliability_support import (
    FAULT_MIX,
    WorkerKiller,
    fault_mix_items,
    run_streams,
    snippet,
    start_app,
    wait_no_descendants,
)

TOTAL = 20_000
MAX_RETRIES = 1


def _timeout_for(sid: str) -> float:
    return 1.0 if sid.startswith("hang-") else 60.0


async def test_faults_under_load_lose_nothing_and_answer_correctly():
    app = await start_app(
        workers=2,
        limits__max_worker_rss_mb=300,
        limits__memory_poll_s=0.05,
        pool__max_retries=MAX_RETRIES,
    )
    killer = WorkerKiller(app, period=1.0)
    try:
        items = fault_mix_items(TOTAL)
        killer.start()
        # Hangs time out after 1 s (their right answer). Every other snippet
        # must get its answer however loaded the machine is, so its timeout is
        # no part of what is tested: a balloon that has not grown past the
        # limit within 1 s (the machine was busy) is rightly a TIMEOUT, so
        # balloons get the long timeout too and the memory watch ends them.
        report = await run_streams(app.port, items, streams=64, window=4, timeout_for=_timeout_for)
        await killer.stop()
        assert report.stream_errors == []
        assert report.missing == 0 and report.duplicates == 0 and report.unknown == 0
        assert report.wrong == [], report.wrong[:5]

        # Per snippet, the status was in its kind's expected set (report.wrong
        # is empty). Per kind: the fault's own status shows up, and CRASH
        # only where kill -9 explains it (every attempt of that snippet was
        # killed).
        by_kind = report.by_kind()
        assert killer.kills >= 5
        assert by_kind["garbage"] == {"CRASH": FAULT_MIX["garbage"]}
        assert by_kind["hang"]["TIMEOUT"] >= 1 and by_kind["oom"]["OUT_OF_MEMORY"] >= 1
        assert by_kind["stderr"]["VALID"] >= 1
        killed_to_crash = sum(by_kind[k]["CRASH"] for k in ("ok", "hang", "oom", "stderr"))
        assert killed_to_crash * (MAX_RETRIES + 1) <= killer.kills, (by_kind, killer.kills)
        for sid, status in report.status_of.items():
            if status == "CRASH" and not sid.startswith("garbage-"):
                assert "SIGKILL" in report.error_of[sid], report.error_of[sid]
        assert sum(by_kind["ok"].values()) == TOTAL - sum(FAULT_MIX.values())
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
