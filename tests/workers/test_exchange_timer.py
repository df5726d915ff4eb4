"""The exchange's timer (issue 28: no wait_for task per command): a command
larger than the pipe takes the drain path and is answered; a hang still
times out, also when its command was large (the drain path)."""

from __future__ import annotations

from workers_support import start_service, verify


async def test_a_command_larger_than_the_pipe_is_answered_then_a_hang_times_out():
    service = await start_service(workers=1)
    try:
        filler = "-- " + "x" * 200 + "\n"
        body = "theorem big : True := trivial\n" + filler * 3000  # ~600 KB: the pipe holds 64 KB
        result = await verify(service, body, snippet_id="big", timeout_s=60)
        assert result.status.name == "VALID", result.error
        hang = await verify(
            service, "theorem h : True := trivial\n--@standin: hang\n", snippet_id="h", timeout_s=1
        )
        assert hang.status.name == "TIMEOUT", hang.error
        big_on_hang = await verify(
            service,
            "theorem t : True := trivial\n--@standin: hang\n" + filler * 3000,
            snippet_id="s2",
            timeout_s=1,
        )
        assert big_on_hang.status.name == "TIMEOUT", big_on_hang.error
    finally:
        await service.pool.close(2.0)
