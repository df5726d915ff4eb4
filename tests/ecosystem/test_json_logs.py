"""Structured logs: one JSON object per line, extras kept."""

from __future__ import annotations

import io
import json
import logging

from leanrpc.logsetup import JsonFormatter, configure_logging


def test_json_lines_carry_level_logger_message_and_extras():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("leanrpc.test.json")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("worker %s restarted", "w3", extra={"cause": "timeout", "rss_mb": 812})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    first, second = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert first["level"] == "warning" and first["logger"] == "leanrpc.test.json"
    assert first["msg"] == "worker w3 restarted"
    assert first["cause"] == "timeout" and first["rss_mb"] == 812
    assert first["ts"].endswith("Z")
    assert second["level"] == "error" and "ValueError: boom" in second["exc"]


def test_configure_logging_switches_formatter():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging(json_lines=True)
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        configure_logging(json_lines=False)
        assert not isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
