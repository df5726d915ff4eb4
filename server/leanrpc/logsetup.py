"""Log setup for `leanrpc serve`: plain lines, or one JSON object per line.

JSON lines (`[server] log_json = true`) are what log shippers (Loki, Fluent
Bit, Cloud Logging) parse without a regex. The formatter is a dozen lines of
our own rather than python-json-logger: it is not a dependency, and the one
thing it adds (field renaming) is not needed.

Protocol junk on a port (a gRPC client pointed at the REST port, a scanner)
makes aiohttp log a full traceback per connection; `ProtocolJunkFilter`
turns that into one line per minute, saying how many were dropped.
"""

from __future__ import annotations

import json
import logging
import time

# LogRecord attributes that are not user `extra=` fields.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class ProtocolJunkFilter(logging.Filter):
    """On aiohttp's server logger: a malformed request is one line, at most one per `every_s`."""

    JUNK = ("BadHttpMessage", "BadStatusLine", "InvalidURLError", "LineTooLong", "BadHttpMethod")

    def __init__(self, every_s: float = 60.0, clock=time.monotonic, *, door: str = "REST port",
                 hint: str = "a gRPC client pointed at --http-port?") -> None:
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
        where = record.getMessage().removeprefix("Error handling request").strip() or "from a client"
        record.msg = "not HTTP/1.1 on the %s %s (%s: %s): %s (at most one such line per %.0f s%s)"
        record.args = (self._door, where, type(exc).__name__, first, self._hint, self._every_s, more)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = None
        record.exc_text = None
        self._last, self._dropped = now, 0
        return True


def configure_logging(json_lines: bool = False, level: int | str = logging.INFO) -> None:
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    server_log = logging.getLogger("aiohttp.server")
    server_log.filters[:] = [f for f in server_log.filters if not isinstance(f, ProtocolJunkFilter)]
    server_log.addFilter(ProtocolJunkFilter())
