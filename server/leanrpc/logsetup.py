"""Log setup for `leanrpc serve`: plain lines, or one JSON object per line.

Every log record is one line. Plain lines read `time LEVEL logger: message`;
a message that carries a newline (a REPL's output quoted in a poison reason)
has it shown as ` | `, so `grep` and a person see one event per line (a
traceback, logged only for a bug, still follows on its own lines).

JSON lines (`[server] log_json = true`, `serve --log-json`) are what log
shippers (Loki, Fluent Bit, Cloud Logging) parse without a regex. They are
python-json-logger's (a kept library, a dependency): it merges each record's
`extra=` fields (worker, event, rpc, client, outcomes, ms), encodes values
json cannot (it falls back to str), and writes tracebacks and stack info as
fields. We only rename its fields (`ts`, `level`, `logger`, `msg`, `exc`) and
write the time in UTC with milliseconds.

Protocol junk on a port (a gRPC client pointed at the REST port, a scanner)
makes aiohttp log a full traceback per connection; `ProtocolJunkFilter`
turns that into one line per minute, saying how many were dropped.
May import: python-json-logger, the standard library.
"""

from __future__ import annotations

import logging
import time

from pythonjsonlogger.json import JsonFormatter as _LibraryJsonFormatter

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLineFormatter(logging.Formatter):
    """The plain format; a newline inside a message becomes ` | `."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(record).replace("\r\n", " | ").replace("\n", " | ")


class JsonFormatter(_LibraryJsonFormatter):
    """One JSON object per line: ts (UTC, ms), level (lower case), logger, msg,
    every `extra=` field, exc (the traceback) when there is one."""

    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def __init__(self) -> None:
        super().__init__(
            "{asctime}{levelname}{name}{message}",
            style="{",
            rename_fields={
                "asctime": "ts",
                "levelname": "level",
                "name": "logger",
                "message": "msg",
                "exc_info": "exc",
                "stack_info": "stack",
            },
            json_ensure_ascii=False,
        )

    def process_log_record(self, log_data: dict) -> dict:
        log_data["level"] = str(log_data.get("level", "")).lower()
        return log_data


class ProtocolJunkFilter(logging.Filter):
    """On aiohttp's server logger: a malformed request is one line, at most one per `every_s`."""

    JUNK = ("BadHttpMessage", "BadStatusLine", "InvalidURLError", "LineTooLong", "BadHttpMethod")

    def __init__(
        self,
        every_s: float = 60.0,
        clock=time.monotonic,
        *,
        door: str = "REST port",
        hint: str = "a gRPC client pointed at --http-port?",
    ) -> None:
        super().__init__()
        self._door, self._hint = door, hint
        self._every_s = every_s
        self._clock = clock
        self._last: float | None = None
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or type(exc).__name__ not in self.JUNK:
            return True
        now = self._clock()
        if self._last is not None and now - self._last < self._every_s:
            self._dropped += 1
            return False
        first = " ".join(str(getattr(exc, "message", "") or exc).split())[:200]
        more = f"; {self._dropped} more dropped" if self._dropped else ""
        where = (
            record.getMessage().removeprefix("Error handling request").strip() or "from a client"
        )
        record.msg = "not HTTP/1.1 on the %s %s (%s: %s): %s (at most one such line per %.0f s%s)"
        record.args = (
            self._door,
            where,
            type(exc).__name__,
            first,
            self._hint,
            self._every_s,
            more,
        )
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = None
        record.exc_text = None
        self._last, self._dropped = now, 0
        return True


# LogRecord fields neither format reads, which the logging module otherwise
# works out for every record: the caller's file, line and function (a walk up
# the stack), the process id (a getpid call), the thread and asyncio task.
# Turned off as the logging HOWTO's "Optimization" section says; the request
# log writes a record per call, and this was a tenth of its cost.
_UNREAD_RECORD_FIELDS = {
    "_srcfile": None,
    "logThreads": False,
    "logProcesses": False,
    "logMultiprocessing": False,
    "logAsyncioTasks": False,
}


def skip_unread_record_fields() -> dict:
    """Stops computing the record fields our formats never show; returns the old settings."""
    old = {name: getattr(logging, name) for name in _UNREAD_RECORD_FIELDS if hasattr(logging, name)}
    for name in old:
        setattr(logging, name, _UNREAD_RECORD_FIELDS[name])
    return old


def configure_logging(json_lines: bool = False, level: int | str = logging.INFO) -> None:
    skip_unread_record_fields()
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if json_lines else OneLineFormatter(PLAIN_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    server_log = logging.getLogger("aiohttp.server")
    server_log.filters[:] = [f for f in server_log.filters if not isinstance(f, ProtocolJunkFilter)]
    server_log.addFilter(ProtocolJunkFilter())
