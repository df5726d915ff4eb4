"""Structured logs: one JSON object per line, extras kept."""

from __future__ import annotations

import io
import json
import logging

from leanrpc.logsetup import JsonFormatter, configure_logging, skip_unread_record_fields


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
    flags = skip_unread_record_fields()
    try:
        configure_logging(json_lines=True)
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        configure_logging(json_lines=False)
        assert not isinstance(root.handlers[0].formatter, JsonFormatter)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for name, value in flags.items():
            setattr(logging, name, value)


def test_unread_record_fields_are_not_computed_and_lines_keep_their_fields():
    flags = skip_unread_record_fields()
    try:
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter())
        records = []
        log = logging.getLogger("leanrpc.test.unread")
        log.addHandler(handler)
        log.addFilter(lambda record: records.append(record) or True)
        log.propagate = False
        try:
            log.warning("worker %s restarted", "w1", extra={"cause": "timeout"})
        finally:
            log.removeHandler(handler)
            log.filters.clear()
        line = json.loads(stream.getvalue())
        assert line["msg"] == "worker w1 restarted" and line["cause"] == "timeout"
        assert line["level"] == "warning" and line["logger"] == "leanrpc.test.unread"
        (record,) = records
        assert record.process is None and record.thread is None  # not looked up
        assert record.pathname == "(unknown file)" and record.lineno == 0  # no stack walk
    finally:
        for name, value in flags.items():
            setattr(logging, name, value)
