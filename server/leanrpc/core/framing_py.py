"""REPL stdout framing and request encoding: the pure-Python twin.

`leanrpc._native.framing` (native/framing.pyx) implements the same API and
behaviour; tests/native runs every test against both. Keep them in step.

The REPL writes each response as JSON (pretty-printed over several lines or
one compact line) followed by an empty line, so its stdout is a sequence of
frames separated by blank lines. No JSON string contains a raw newline, so a
blank line can only be a delimiter (shared/REPL-PROTOCOL.md, section 3).

Definitions both implementations follow:

* A *blank line* is a line holding only spaces, tabs and CRs; the delimiter
  is ``\\n`` + blank line + ``\\n``, so ``}\\n\\n`` and ``}\\r\\n\\r\\n`` both end
  a frame.
* A *frame* is the text between two delimiters with leading and trailing
  whitespace (space, tab, CR, LF) removed. Whitespace-only frames are skipped.
* ``FrameTooLarge`` is raised when a frame is longer than ``max_frame`` bytes,
  as soon as the bytes already held prove it (so any chunking of the same
  stream raises on the same frame), or when more than ``2 * max_frame``
  bytes of trailing whitespace pile up behind a pending frame.
"""

import json
import re

from leanrpc.errors import (
    FrameDecodeError,
    FrameTooLarge,
    FramingError,
    InternalError,
    RequestError,
)

__all__ = ["DEFAULT_MAX_FRAME", "FrameDecoder", "decode_frame", "encode_request"]

DEFAULT_MAX_FRAME = 64 * 2**20

_WS = b" \t\r\n"
_DELIMITER = re.compile(rb"\n[ \t\r]*\n")
_NOT_WS = re.compile(rb"[^ \t\r\n]")

# Built once: json.dumps() with keyword arguments builds a new encoder per call.
# allow_nan=False because the REPL's JSON parser rejects NaN/Infinity, and any
# unparseable request kills the REPL process (REPL-PROTOCOL.md section 8).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class FrameDecoder:
    """Cuts the REPL's stdout byte stream into frames (one JSON response each).

    Incremental and I/O-free: `feed` whatever the pipe returned, in any
    chunking, and get back the frames it completed, in order.

    Args:
        max_frame: the largest frame accepted, in bytes.
    """

    __slots__ = ("_buf", "_scan", "_hi", "_max_frame", "_broken")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 1:
            raise ValueError(f"max_frame must be positive, got {max_frame}")
        self._max_frame = int(max_frame)
        self._buf = bytearray()
        # Where the next delimiter search starts: the last newline whose line
        # is blank so far (it may begin a delimiter), else the buffer end.
        self._scan = 0
        # One past the last non-whitespace byte of the pending frame. The
        # pending frame starts at 0 (leading whitespace is dropped).
        self._hi = 0
        self._broken = False

    @property
    def max_frame(self) -> int:
        return self._max_frame

    @property
    def buffered(self) -> int:
        """Bytes held for the frame not yet complete."""
        return len(self._buf)

    def reset(self) -> None:
        """Drops everything held and makes a broken decoder usable again."""
        self._buf = bytearray()
        self._scan = 0
        self._hi = 0
        self._broken = False

    def feed(self, data: bytes) -> list[bytes]:
        """Adds bytes from the stream; returns the frames they completed.

        Raises:
            FrameTooLarge: a frame is longer than max_frame. Frames completed
                earlier in the same call are dropped with it, and the decoder
                refuses input until `reset()`.
            FramingError: the decoder is broken by an earlier FrameTooLarge.
        """
        if self._broken:
            raise FramingError("frame decoder is broken by an earlier FrameTooLarge; reset() it")
        buf = self._buf
        old_len = len(buf)
        buf += data
        frames: list[bytes] = []
        start = 0
        pos = self._scan
        search = _DELIMITER.search
        limit = self._max_frame
        while True:
            m = search(buf, pos)
            if m is None:
                break
            end = m.start()
            first = _NOT_WS.search(buf, start, end)
            if first is not None:
                a = first.start()
                while buf[end - 1] in _WS:  # stops at `a`: buf[a] is not whitespace
                    end -= 1
                if end - a > limit:
                    self._broken = True
                    raise FrameTooLarge(
                        f"REPL response frame of {end - a} bytes exceeds max_frame={limit}"
                    )
                with memoryview(buf) as view:
                    frames.append(bytes(view[a:end]))
            start = pos = m.end()
        # Drop the pending frame's leading whitespace; it can only ever belong
        # to an empty frame, which is skipped anyway.
        first = _NOT_WS.search(buf, start)
        start = len(buf) if first is None else first.start()
        if start >= old_len:
            hi = start
            tail_from = start
        else:
            hi = self._hi
            tail_from = old_len
        tail = buf[tail_from:].rstrip(_WS)
        if tail:
            hi = tail_from + len(tail)
        if start:
            del buf[:start]
        self._hi = hi - start
        newline = buf.rfind(b"\n", max(pos - start, 0))
        self._scan = len(buf) if newline < 0 else newline
        if self._hi > limit:
            self._broken = True
            raise FrameTooLarge(
                f"pending REPL response frame exceeds max_frame={limit} bytes ({self._hi} so far)"
            )
        if len(buf) > 2 * limit:
            self._broken = True
            raise FrameTooLarge(f"{len(buf)} bytes held without a frame end (max_frame={limit})")
        return frames


def decode_frame(frame: bytes) -> dict:
    """Parses one frame: strict UTF-8, JSON, and an object at the top.

    Raises:
        FrameDecodeError: invalid UTF-8, invalid or truncated JSON, or JSON
            that is not an object.
    """
    try:
        text = str(frame, "utf-8")
    except UnicodeDecodeError as exc:
        raise FrameDecodeError(
            f"REPL frame is not valid UTF-8: {exc.reason} at byte {exc.start}",
            detail=_excerpt(frame),
        ) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FrameDecodeError(
            f"REPL frame is not valid JSON: {exc}", detail=_excerpt(frame)
        ) from None
    except RecursionError:
        raise FrameDecodeError(
            "REPL frame is JSON nested too deeply to parse", detail=_excerpt(frame)
        ) from None
    if type(obj) is not dict:
        raise FrameDecodeError(
            f"REPL frame is a JSON {type(obj).__name__}, not an object", detail=_excerpt(frame)
        )
    return obj


def encode_request(obj: dict) -> bytes:
    """Encodes one REPL request: compact JSON on one line, then one blank line.

    Non-ASCII text is written as raw UTF-8 (the REPL's parser garbles
    surrogate-pair escapes, REPL-PROTOCOL.md section 2).

    Raises:
        RequestError: `obj` is not a dict, holds values JSON cannot encode
            (including NaN/Infinity), or text that is not valid Unicode
            (lone surrogates).
    """
    if type(obj) is not dict:
        raise RequestError(f"a REPL request must be a JSON object (dict), got {type(obj).__name__}")
    try:
        text = _ENCODER.encode(obj)
    except (TypeError, ValueError, RecursionError) as exc:
        raise RequestError(f"request cannot be encoded as JSON: {exc}") from None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(
            f"request text is not valid Unicode: {exc.reason} at index {exc.start}"
        ) from None
    if b"\n" in data:
        # Cannot happen: json escapes newlines inside strings. A raw one would
        # end the request early and kill the REPL.
        raise InternalError("encoded request contains a raw newline")
    return data + b"\n\n"


def _excerpt(frame: bytes, limit: int = 200) -> str:
    head = bytes(frame[:limit])
    more = f" ... ({len(frame)} bytes)" if len(frame) > limit else ""
    return f"frame starts: {head!r}{more}"
