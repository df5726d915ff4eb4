"""The REST doors' refusals (gateway/refusals.py): one HTTP answer per
refused call, its status from the one error table, a retry hint where
waiting helps (OVERLOADED, the per-client limit, NOT_SERVING)."""

from __future__ import annotations

import json

from leanrpc.edge.limiter import LimitExceeded
from leanrpc.errors import NotServingError, OverloadedError, RequestError
from leanrpc.gateway.refusals import refusal


def test_not_serving_is_503_with_a_retry_hint():
    answer = refusal(NotServingError("draining"))
    assert answer.status == 503
    assert int(answer.headers["Retry-After"]) >= 1
    assert json.loads(answer.body)["detail"].startswith("not serving: ")


def test_overload_keeps_its_own_hint_in_whole_seconds():
    answer = refusal(OverloadedError("queue full", retry_after_s=2.2))
    assert answer.status == 429 and answer.headers["Retry-After"] == "3"
    limited = refusal(LimitExceeded(held=4, limit=4))
    assert limited.status == 429 and limited.headers["Retry-After"] == "1"


def test_a_callers_own_fault_has_no_retry_hint():
    answer = refusal(RequestError("bad input"))
    assert answer.status == 400 and "Retry-After" not in answer.headers
