"""Timings split a request's time by phase; starting a REPL is its own phase."""

from verify_support import running_server

HEADERS = ("import Mathlib\n\n", "import Mathlib\nimport Aesop\n\n")
BODY = "theorem t : 1 + 1 = 2 := by norm_num\n"


async def test_boot_is_reported_apart_from_header_and_body():
    # One header per worker: a header switch starts a fresh REPL (with several,
    # the worker would import the second header in-process, no boot).
    async with running_server(workers=1, pool__min_warm=0, pool__max_headers_per_worker=1) as (
        app,
        client,
    ):
        # One worker, alternating headers: each switch starts a fresh REPL.
        first = (await client.verify_batch([HEADERS[0] + BODY]))[0]
        warm = (await client.verify_batch([HEADERS[0] + BODY]))[0]
        switched = (await client.verify_batch([HEADERS[1] + BODY]))[0]
    assert [r.status for r in (first, warm, switched)] == ["VALID"] * 3
    # The pool boots its first worker at startup (identity probe): no boot to pay.
    assert first.time_boot_s == 0.0
    assert switched.time_boot_s > 0 and not switched.warm_header
    assert warm.time_boot_s == 0.0 and warm.warm_header
    assert app.pool.stats.header_switches == 1
    for result in (first, warm, switched):
        assert result.time_total_s >= result.time_boot_s + result.time_header_s + result.time_body_s
