"""Preamble semantics (issue 15 item 5, pool side): a message on an
`open`/`set_option` line is reported in the result at its position; an error
there makes the snippet INVALID, not REJECTED, and kills no worker. Only a
failed `import` is REJECTED."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from leanrpc.pool import Pool
from leanrpc.results import Position, Severity
from leanrpc.services.verify import VerifyOptions, VerifyService
from testkit import loopback_config

FAKE = str(pathlib.Path(__file__).with_name("preamble_repl.py"))


@pytest.fixture
async def service(tmp_path):
    log = tmp_path / "commands.log"
    config = loopback_config(
        1, repl__command=[sys.executable, FAKE], repl__env={"PREAMBLE_REPL_LOG": str(log)}
    )
    pool = Pool(config)
    await pool.start()
    service = VerifyService(pool, config)
    service.log = log
    try:
        yield service
    finally:
        await pool.close()


async def _verify(service, code):
    # preamble_repl does not answer `#print axioms`: the check is off here.
    return await service.verify("s", code, VerifyOptions(check_axioms=False))


def _sent(service) -> list[str]:
    return [json.loads(line) for line in service.log.read_text().splitlines()]


async def test_an_error_on_an_open_line_is_an_invalid_result_with_its_position(service):
    code = "import Mathlib\nopen Bad.Space\n\ntheorem a : 1 = 1 := rfl\n"
    result = await _verify(service, code)
    assert result.status.name == "INVALID", result
    [error] = result.messages
    assert error.severity is Severity.ERROR
    assert error.start == Position(2, 5) and "unknown namespace 'Bad.Space'" in error.text
    assert result.error == ""
    # The worker was not killed, and the same snippet again gets the same
    # answer from the env it cached (the preamble is not re-sent).
    again = await _verify(service, code)
    assert again.status.name == "INVALID" and again.messages == result.messages
    assert again.reuse.worker == result.reuse.worker
    assert not service.pool.stats.restarts
    assert sum(1 for cmd in _sent(service) if "open Bad.Space" in cmd) == 1


async def test_a_warning_on_a_set_option_line_is_reported_and_the_snippet_stays_valid(service):
    result = await _verify(
        service, "import Mathlib\nset_option linter.warnme true\n\ntheorem b : 1 = 1 := rfl\n"
    )
    assert result.status.name == "VALID", result
    [warning] = result.messages
    assert warning.severity is Severity.WARNING and warning.start == Position(2, 11)


async def test_a_failed_import_is_still_rejected(service):
    result = await _verify(service, "import Nope\n\ntheorem c : 1 = 1 := rfl\n")
    assert result.status.name == "REJECTED", result
    assert any("Nope" in m.text for m in result.messages)
