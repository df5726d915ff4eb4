"""The retry table beside ON_FAILURE (pool/retry.py), read without a pool."""

from __future__ import annotations

import pytest

from leanrpc.pool.retry import ON_RETRY, Facts, Next, Then, decide


def _facts(**kw) -> Facts:
    base = dict(
        shared=False,
        fresh_process=False,
        closing=False,
        charged=1,
        attempts=1,
        max_retries=2,
        breaker_allows=True,
    )
    base.update(kw)
    return Facts(**base)


def test_a_failed_group_s_body_always_goes_again_alone():
    assert decide(Then.ALONE, _facts(closing=True, charged=99)) is Next.ALONE


def test_a_lead_whose_rider_timed_out_goes_again_alone():
    """pool/runner.py ON_FAILURE: the lead ran before the rider that timed out, so it may
    have left what stalled it (pool/pipeline.py RiderTimedOut); uncharged, even while the
    pool closes (the requeue itself answers it then: Pool.requeue)."""
    from leanrpc.pool.pipeline import RiderTimedOut
    from leanrpc.pool.runner import ON_FAILURE

    [then] = [then for kind, _kill, then in ON_FAILURE if kind is RiderTimedOut]
    assert decide(then, _facts(closing=True, charged=99)) is Next.ALONE


def test_a_crash_on_a_shared_process_goes_once_more_uncharged_on_a_fresh_one():
    assert decide(Then.RETRY, _facts(shared=True, charged=99)) is Next.FRESH
    # Once it asked for a fresh process, the usual charge applies.
    assert decide(Then.RETRY, _facts(shared=True, fresh_process=True, charged=3)) is Next.FAIL


@pytest.mark.parametrize("charged,step", [(1, Next.RETRY), (2, Next.RETRY), (3, Next.FAIL)])
def test_crash_retries_are_counted_against_max_retries(charged, step):
    assert decide(Then.RETRY, _facts(charged=charged)) is step


def test_nothing_is_retried_while_the_pool_closes():
    assert decide(Then.RETRY, _facts(closing=True)) is Next.FAIL
    assert decide(Then.RETRY, _facts(shared=True, closing=True)) is Next.FAIL


@pytest.mark.parametrize(
    "allows,attempts,step",
    [(True, 3, Next.REBOOT), (True, 4, Next.NOT_SERVING), (False, 1, Next.NOT_SERVING)],
)
def test_a_boot_failure_is_never_a_verdict(allows, attempts, step):
    assert decide(Then.RETRY_BOOT, _facts(breaker_allows=allows, attempts=attempts)) is step


def test_fail_is_the_default_and_every_row_names_a_known_then():
    assert decide(Then.FAIL, _facts()) is Next.FAIL
    assert {row[0] for row in ON_RETRY} <= set(Then)
