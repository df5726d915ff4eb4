"""Issue 44 item 4: a REPL answer whose infotree nests deeper than the decoder
goes poisons the worker (as any unreadable frame does) and is told in one log
line with its depth, never as RecursionError tracebacks."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from leanrpc.pool.pool import Pool
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions, VerifyService
from testkit import loopback_config

FAKE = [sys.executable, str(Path(__file__).with_name("deep_infotree_repl.py"))]


async def test_a_2000_deep_infotree_gives_one_log_line_with_its_depth(caplog):
    config = loopback_config(1, repl__command=list(FAKE))
    pool = Pool(config)
    await pool.start()
    service = VerifyService(pool, config)
    try:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="leanrpc"):
            result = await service.verify(
                "deep",
                "import Mathlib\n\ntheorem t : True := trivial -- deep=2000\n",
                VerifyOptions(timeout_s=20, check_axioms=False),
            )
        assert result.status is not Status.VALID, result
        about = [r for r in caplog.records if "deep" in r.getMessage()]
        assert len(about) == 1, [r.getMessage() for r in caplog.records]
        assert (
            "4001 levels" in about[0].getMessage()
        )  # 2,000 nodes: node object + children array each
        assert not any(r.exc_info for r in caplog.records)
        assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
        healthy = await service.verify(
            "ok",
            "import Mathlib\n\ntheorem t : True := trivial\n",
            VerifyOptions(timeout_s=20, check_axioms=False),
        )
        assert healthy.status is Status.VALID, healthy
    finally:
        await pool.close(2.0)
