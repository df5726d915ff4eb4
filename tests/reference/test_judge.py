"""The external judge (issue 25 item 5) with a fake judge script: it runs on
pinned VALID results only, its level is in the result, a refusal or a hang
downgrades the verdict, and it runs on its own bounded pool."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

JUDGE = [sys.executable, str(Path(__file__).with_name("fake_judge.py"))]
HEADER = "import Mathlib\n\n"
REFERENCE = HEADER + "theorem t : 2 + 2 = 4 := by sorry\n"
GOOD = HEADER + "theorem t : 2 + 2 = 4 := by\n  norm_num\n"
HELPED = HEADER + "lemma helper : 4 = 4 := rfl\n\ntheorem t : 2 + 2 = 4 := by\n  exact helper\n"
CHANGED = HEADER + "theorem t : 2 + 2 = 5 := by\n  norm_num\n"


def _judge(mode: str, **extra):
    return {
        "judge__command": [*JUDGE, mode],
        "judge__name": "fake",
        "judge__sandboxed": False,
        **extra,
    }


async def test_accepting_judge_confirms_pinned_valid_and_skips_the_rest():
    async with running_server(**_judge("accept")) as (app, client):
        good, changed, unpinned = await client.verify_batch(
            [GOOD, CHANGED, GOOD], references=[REFERENCE, REFERENCE, ""]
        )
        assert good.status == "VALID" and good.judge == "ACCEPTED"
        # Not VALID after the pin, or not pinned: the judge is not asked.
        assert changed.status == "INVALID" and changed.judge == ""
        assert unpinned.status == "VALID" and unpinned.judge == ""
        assert app.service.judge.runs == 1


async def test_refusing_judge_makes_a_pinned_valid_invalid():
    async with running_server(**_judge("grep")) as (_app, client):
        good, helped = await client.verify_batch([GOOD, HELPED], references=[REFERENCE] * 2)
        assert (good.status, good.judge) == ("VALID", "ACCEPTED")
        assert (helped.status, helped.judge) == ("INVALID", "REFUSED")
        assert helped.reference.passed  # the pin passed; the judge is the stricter tier
        assert "judge fake refused" in helped.error


async def test_hanging_judge_is_killed_at_its_timeout_and_the_verdict_is_withheld():
    async with running_server(**_judge("hang", judge__timeout_s=1.0, judge__max_concurrent=2)) as (
        app,
        client,
    ):
        results = await client.verify_batch([GOOD] * 3, references=[REFERENCE] * 3)
        assert [(r.status, r.judge) for r in results] == [("REJECTED", "TIMEOUT")] * 3
        assert all("gave no verdict (TIMEOUT)" in r.error for r in results)
        assert (
            app.service.judge.runs == 3 and app.service.judge.peak == 2
        )  # bounded by max_concurrent
        # Its own pool: the REPL workers still answer unpinned snippets.
        [plain] = await client.verify_batch([GOOD])
        assert plain.status == "VALID"


async def test_judge_that_cannot_start_fails_closed():
    async with running_server(judge__command=["/nonexistent/judge"], judge__sandboxed=False) as (
        _app,
        client,
    ):
        [result] = await client.verify_batch([GOOD], references=[REFERENCE])
        assert (result.status, result.judge) == ("REJECTED", "FAILED")


@pytest.mark.parametrize("sandboxed", [True, False])
async def test_judge_runs_in_the_workers_sandbox_with_their_limits(
    tmp_path, monkeypatch, sandboxed
):
    """The judge runs through the workers' launcher: a fresh root without the
    host's files, the scrubbed environment, the configured rlimits, no network.
    Unsandboxed (the control) the same judge sees the host and refuses."""
    marker = tmp_path / "host-only"
    marker.write_text("visible outside the sandbox only")
    monkeypatch.setenv("LEANRPC_JUDGE_CANARY", "a secret of the server's environment")
    code = GOOD + f"-- marker: {marker}\n-- fsize: {7 * 2**20}\n"
    async with running_server(
        judge__command=[*JUDGE, "jailed"],
        judge__name="fake",
        judge__sandboxed=sandboxed,
        sandbox__mode="unshare",
        limits__max_file_size_mb=7,
    ) as (app, client):
        assert (app.service.judge.launcher is app.pool.launcher) == sandboxed
        [result] = await client.verify_batch([code], references=[REFERENCE])
        if sandboxed:
            assert (result.status, result.judge, result.checks.judge) == (
                "VALID",
                "ACCEPTED",
                "PASSED",
            ), result.error
        else:
            assert (result.status, result.judge, result.checks.judge) == (
                "INVALID",
                "REFUSED",
                "FAILED",
            )
            assert "'host file': True" in result.error and "'canary': True" in result.error


async def test_judge_is_given_the_qualified_names_to_check():
    """comparator wants `theorem_names` and `definition_names`: the judge gets
    the reference's theorems and its `sorry` defs (holes), namespaces included."""
    from leanrpc.services.verify import VerifyOptions

    reference = HEADER + (
        "namespace P\n\ndef answer : Nat := sorry\n\ndef two : Nat := 2\n\n"
        "theorem main : answer = two := by\n  sorry\n\nend P\n"
    )
    proof = HEADER + (
        "namespace P\n\ndef answer : Nat := 2\n\ndef two : Nat := 2\n\n"
        "theorem main : answer = two := by\n  rfl\n\nend P\n"
    )
    async with running_server(**_judge("names")) as (app, _client):
        result = await app.service.verify("n", proof, VerifyOptions(reference=reference))
        assert result.status.name == "VALID" and result.judge.level.name == "ACCEPTED", result.error
        assert "theorems=['P.main'] definitions=['P.answer']" in result.judge.detail
