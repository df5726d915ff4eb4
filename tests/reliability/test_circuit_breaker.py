"""The restart policy as its own object: CircuitBreaker with a fake clock."""

from __future__ import annotations

from leanrpc.pool.supervisor import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_the_limit_of_consecutive_failures_and_half_opens_after_the_cooldown():
    clock = Clock()
    breaker = CircuitBreaker(limit=3, cooldown_s=30.0, clock=clock)
    assert not breaker.record_failure(RuntimeError("boom 1"))
    assert not breaker.record_failure(RuntimeError("boom 2"))
    assert breaker.allow()
    assert breaker.record_failure(RuntimeError("boom 3")), "the third failure opens it"
    assert not breaker.allow()
    assert "3 consecutive REPL boot failures" in breaker.reason and "boom 3" in breaker.reason
    clock.now += 29.9
    assert not breaker.allow()
    clock.now += 0.2
    assert breaker.allow(), "half-open: the next boot may try"
    # a failure while half-open re-opens it for a full cooldown
    assert breaker.record_failure(RuntimeError("boom 4"))
    assert not breaker.allow()
    breaker.record_success()
    assert breaker.allow() and breaker.consecutive_failures == 0


def test_a_success_resets_the_count():
    breaker = CircuitBreaker(limit=2, cooldown_s=1.0, clock=Clock())
    breaker.record_failure(RuntimeError("a"))
    breaker.record_success()
    assert not breaker.record_failure(RuntimeError("b"))
    assert breaker.allow()
