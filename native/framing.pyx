"""REPL stdout framing and request encoding, compiled (leanrpc._native.framing).

Same API and behaviour as the pure twin leanrpc.core.framing_py, whose
docstring states the frame rules; tests/native runs every test on both.

The decoder keeps the pending bytes in one C buffer, finds line ends with
memchr and cuts frames without copying them more than once. decode_frame
calls the C JSON scanner of the stdlib directly (json.loads wraps it in
several Python-level calls) and falls back to json.loads only to word an
error exactly like the twin.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.string cimport memchr, memcpy, memmove

import json

from leanrpc.errors import FramingError, FrameDecodeError, FrameTooLarge, InternalError, RequestError

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)

__all__ = ["DEFAULT_MAX_FRAME", "FrameDecoder", "decode_frame", "encode_request"]

DEFAULT_MAX_FRAME = 64 * 2**20

# Capacity the buffer starts with and shrinks back to.
cdef Py_ssize_t _MIN_CAPACITY = 1 << 16

# Module-level singletons, as in the twin. The C scanner clears its key memo
# after every call, so one instance is safe to reuse.
cdef object _scan_once = json.JSONDecoder().scan_once
cdef object _encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
cdef object _json_loads = json.loads
cdef object _JSONDecodeError = json.JSONDecodeError


cdef inline bint _is_ws(char c) noexcept nogil:
    return c == c" " or c == c"\n" or c == c"\r" or c == c"\t"


cdef inline bint _is_blank(char c) noexcept nogil:
    # May appear on a blank line: everything but the newline itself.
    return c == c" " or c == c"\r" or c == c"\t"


cdef inline bint _all_blank(const char* buf, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
    while first < stop:
        if not _is_blank(buf[first]):
            return False
        first += 1
    return True


cdef class FrameDecoder:
    """Cuts the REPL's stdout byte stream into frames (one JSON response each).

    Incremental and I/O-free: `feed` whatever the pipe returned, in any
    chunking, and get back the frames it completed, in order.

    Args:
        max_frame: the largest frame accepted, in bytes.
    """

    cdef char* _buf          # the pending frame; leading whitespace already dropped
    cdef Py_ssize_t _len     # bytes used in _buf
    cdef Py_ssize_t _cap     # bytes allocated for _buf
    cdef Py_ssize_t _prev    # the last newline seen, or -1: a blank line after it ends the frame
    cdef Py_ssize_t _hi      # one past the last non-whitespace byte of the pending frame
    cdef Py_ssize_t _max_frame
    cdef bint _broken        # set by FrameTooLarge; feed() refuses until reset()

    def __cinit__(self):
        self._buf = NULL
        self._len = 0
        self._cap = 0
        self._prev = -1
        self._hi = 0
        self._broken = False

    def __init__(self, Py_ssize_t max_frame=DEFAULT_MAX_FRAME):
        if max_frame < 1:
            raise ValueError(f"max_frame must be positive, got {max_frame}")
        self._max_frame = max_frame

    def __dealloc__(self):
        PyMem_Free(self._buf)

    @property
    def max_frame(self):
        return self._max_frame

    @property
    def buffered(self):
        """Bytes held for the frame not yet complete."""
        return self._len

    def reset(self):
        """Drops everything held and makes a broken decoder usable again."""
        self._len = 0
        self._prev = -1
        self._hi = 0
        self._broken = False
        if self._cap > _MIN_CAPACITY:
            self._resize(_MIN_CAPACITY)

    def feed(self, data):
        """Adds bytes from the stream; returns the frames they completed.

        Raises:
            FrameTooLarge: a frame is longer than max_frame. Frames completed
                earlier in the same call are dropped with it, and the decoder
                refuses input until `reset()`.
            FramingError: the decoder is broken by an earlier FrameTooLarge.
        """
        cdef Py_buffer view
        cdef Py_ssize_t old_len = self._len
        if self._broken:
            raise FramingError("frame decoder is broken by an earlier FrameTooLarge; reset() it")
        if PyBytes_CheckExact(data):
            self._append(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        else:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            try:
                self._append(<const char*>view.buf, view.len)
            finally:
                PyBuffer_Release(&view)
        return self._extract(old_len)

    cdef int _resize(self, Py_ssize_t capacity) except -1:
        cdef char* grown = <char*>PyMem_Realloc(self._buf, <size_t>capacity)
        if grown == NULL:
            raise MemoryError()
        self._buf = grown
        self._cap = capacity
        return 0

    cdef int _append(self, const char* data, Py_ssize_t size) except -1:
        cdef Py_ssize_t need = self._len + size
        cdef Py_ssize_t capacity
        if need > self._cap:
            capacity = max(need, self._cap * 2, _MIN_CAPACITY)
            self._resize(capacity)
        if size:
            memcpy(self._buf + self._len, data, <size_t>size)
        self._len = need
        return 0

    cdef list _extract(self, Py_ssize_t old_len):
        # Visits each newline once (memchr) and asks whether the line it ends
        # is blank. Looking at the line's last byte first settles that in
        # O(1) for nearly every line of pretty-printed JSON.
        cdef list frames = []
        cdef char* buf = self._buf
        cdef Py_ssize_t length = self._len
        cdef Py_ssize_t limit = self._max_frame
        cdef Py_ssize_t start = 0
        cdef Py_ssize_t prev = self._prev
        cdef Py_ssize_t pos = old_len
        cdef Py_ssize_t cur, a, end, hi, tail_from, k
        cdef const char* newline
        while True:
            newline = <const char*>memchr(buf + pos, c"\n", <size_t>(length - pos))
            if newline == NULL:
                break
            cur = newline - buf
            pos = cur + 1
            if cur != prev + 1 and not (_is_blank(buf[cur - 1]) and _all_blank(buf, prev + 1, cur - 1)):
                prev = cur
                continue
            # A blank line ends at `cur`: the frame is [start, prev) without
            # surrounding whitespace (nothing if prev is before start).
            a = start
            while a < prev and _is_ws(buf[a]):
                a += 1
            if a < prev:
                end = prev
                while _is_ws(buf[end - 1]):  # stops at a: buf[a] is not whitespace
                    end -= 1
                if end - a > limit:
                    self._broken = True
                    raise FrameTooLarge(f"REPL response frame of {end - a} bytes exceeds max_frame={limit}")
                frames.append(PyBytes_FromStringAndSize(buf + a, end - a))
            start = pos
            prev = cur
        # Drop the pending frame's leading whitespace; it can only ever belong
        # to an empty frame, which is skipped anyway.
        while start < length and _is_ws(buf[start]):
            start += 1
        if start >= old_len:
            hi = start
            tail_from = start
        else:
            hi = self._hi
            tail_from = old_len
        k = length
        while k > tail_from and _is_ws(buf[k - 1]):
            k -= 1
        if k > tail_from:
            hi = k
        if prev < start - 1:
            # Only whitespace was dropped since that newline, so the line after
            # it is as blank as if it began at start.
            prev = start - 1
        if start:
            length -= start
            if length:
                memmove(buf, buf + start, <size_t>length)
            hi -= start
            prev -= start
        self._len = length
        self._hi = hi
        self._prev = prev
        if self._cap > (1 << 22) and length < self._cap // 8:
            self._resize(max(2 * length, _MIN_CAPACITY))
        if hi > limit:
            self._broken = True
            raise FrameTooLarge(f"pending REPL response frame exceeds max_frame={limit} bytes ({hi} so far)")
        if length > 2 * limit:
            self._broken = True
            raise FrameTooLarge(f"{length} bytes held without a frame end (max_frame={limit})")
        return frames


def decode_frame(frame):
    """Parses one frame: strict UTF-8, JSON, and an object at the top.

    Raises:
        FrameDecodeError: invalid UTF-8, invalid or truncated JSON, or JSON
            that is not an object.
    """
    cdef Py_buffer view
    cdef const char* data
    cdef Py_ssize_t size, lead, trail, end
    if PyBytes_CheckExact(frame):
        data = PyBytes_AS_STRING(frame)
        size = PyBytes_GET_SIZE(frame)
        text = _decode_utf8(data, size, frame)
    else:
        PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
        try:
            data = <const char*>view.buf
            size = view.len
            text = _decode_utf8(data, size, frame)
        finally:
            PyBuffer_Release(&view)
        data = NULL  # the view is released; only `text` is used from here
    lead = 0
    if data != NULL:
        while lead < size and _is_ws(data[lead]):
            lead += 1
        if lead < size and data[lead] == c"{":
            trail = 0
            while _is_ws(data[size - 1 - trail]):  # stops at the "{"
                trail += 1
            try:
                obj, end = _scan_once(text, lead)
            except Exception:
                pass  # let the slow path word the error
            else:
                # Whitespace is ASCII, so byte and character counts agree on it.
                if end == len(<str>text) - trail and type(obj) is dict:
                    return obj
    return _decode_slow(text, frame)


cdef str _decode_utf8(const char* data, Py_ssize_t size, frame):
    try:
        return PyUnicode_DecodeUTF8(data, size, "strict")
    except UnicodeDecodeError as exc:
        raise FrameDecodeError(
            f"REPL frame is not valid UTF-8: {exc.reason} at byte {exc.start}", detail=_excerpt(frame)
        ) from None


cdef dict _decode_slow(str text, frame):
    # Words every error exactly as the twin does.
    try:
        obj = _json_loads(text)
    except _JSONDecodeError as exc:
        raise FrameDecodeError(f"REPL frame is not valid JSON: {exc}", detail=_excerpt(frame)) from None
    except RecursionError:
        raise FrameDecodeError("REPL frame is JSON nested too deeply to parse", detail=_excerpt(frame)) from None
    if type(obj) is not dict:
        raise FrameDecodeError(f"REPL frame is a JSON {type(obj).__name__}, not an object", detail=_excerpt(frame))
    return obj


def encode_request(obj):
    """Encodes one REPL request: compact JSON on one line, then one blank line.

    Non-ASCII text is written as raw UTF-8 (the REPL's parser garbles
    surrogate-pair escapes, REPL-PROTOCOL.md section 2).

    Raises:
        RequestError: `obj` is not a dict, holds values JSON cannot encode
            (including NaN/Infinity), or text that is not valid Unicode
            (lone surrogates).
    """
    cdef Py_ssize_t size = 0
    cdef const char* data
    cdef char* out_data
    if type(obj) is not dict:
        raise RequestError(f"a REPL request must be a JSON object (dict), got {type(obj).__name__}")
    try:
        text = _encode(obj)
    except (TypeError, ValueError, RecursionError) as exc:
        raise RequestError(f"request cannot be encoded as JSON: {exc}") from None
    try:
        data = PyUnicode_AsUTF8AndSize(text, &size)
    except UnicodeEncodeError as exc:
        raise RequestError(f"request text is not valid Unicode: {exc.reason} at index {exc.start}") from None
    if memchr(data, c"\n", <size_t>size) != NULL:
        # Cannot happen: json escapes newlines inside strings. A raw one would
        # end the request early and kill the REPL.
        raise InternalError("encoded request contains a raw newline")
    out = PyBytes_FromStringAndSize(NULL, size + 2)
    out_data = PyBytes_AS_STRING(out)
    memcpy(out_data, data, <size_t>size)
    out_data[size] = c"\n"
    out_data[size + 1] = c"\n"
    return out


def _excerpt(frame, Py_ssize_t limit=200):
    head = bytes(frame[:limit])
    more = f" ... ({len(frame)} bytes)" if len(frame) > limit else ""
    return f"frame starts: {head!r}{more}"
