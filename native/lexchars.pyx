# cython: language_level=3
"""Compiled twin of leanrpc.core.lexchars: the one lexer's character-class
runs (core/lexer.py), each one C loop instead of one `re` match.

The lexer steps a few times per snippet for the code policy and once per
literal or comment for the axiom plan's mask; each step was several `re`
matches, each a few hundred nanoseconds of call and match-object overhead.
The classes are not written here: `set_classes` receives the table that
core.lexchars builds from its own class strings (one flag byte per code
point below 0x20000; every code point above is in no class), so the compiled
and pure readings cannot drift apart on a character. The run rules
(`plain_end`'s alternatives and look-arounds, `space_end`'s) are the
regexes' in core.lexchars, transliterated; tests/native/test_native_lexchars.py
checks every code point's flags and random and real texts against them.
"""

from cpython.unicode cimport (
    PyUnicode_DATA,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    PyUnicode_READ,
)

DEF TABLE_SIZE = 0x20000
# Flags, as core.lexchars sets them.
DEF ID_FIRST = 1
DEF ID_REST = 2
DEF VERSIONED = 4
DEF PLAIN_STOP = 8

cdef unsigned char _flags[TABLE_SIZE]
cdef bint _ready = False


def set_classes(bytes table):
    """The flag of every code point below 0x20000 (core.lexchars.class_table)."""
    global _ready
    cdef Py_ssize_t i
    if len(table) != TABLE_SIZE:
        raise ValueError(f"the class table has {TABLE_SIZE} entries")
    for i in range(TABLE_SIZE):
        _flags[i] = table[i]
    _ready = True


cdef inline unsigned char _flag(Py_UCS4 c) noexcept nogil:
    return _flags[c] if c < TABLE_SIZE else 0


cdef inline int _check() except -1:
    if not _ready:
        raise RuntimeError("leanrpc._native.lexchars: set_classes was not called")
    return 0


def plain_end(str text, Py_ssize_t pos, Py_ssize_t limit):
    """`_PLAIN.match(text, pos, limit).end()`: a run with no literal or
    comment opener (see core.lexchars._PLAIN for each alternative)."""
    _check()
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t i = pos
    cdef Py_UCS4 c, nxt, before
    if limit > n:
        limit = n
    while i < limit:
        c = PyUnicode_READ(kind, data, i)
        if not (_flag(c) & PLAIN_STOP):
            i += 1
            continue
        nxt = PyUnicode_READ(kind, data, i + 1) if i + 1 < limit else 0
        if c == 45 or c == 47:  # `-` or `/` not before `-`
            if nxt == 45:
                break
        elif c == 48:  # `0` not before x X b B o O
            if nxt == 120 or nxt == 88 or nxt == 98 or nxt == 66 or nxt == 111 or nxt == 79:
                break
        elif c == 39:  # `'` right after [A-Za-z_], not after a digit and e/E
            if i == 0:
                break
            before = PyUnicode_READ(kind, data, i - 1)
            if not ((65 <= before <= 90) or (97 <= before <= 122) or before == 95):
                break
            if (before == 101 or before == 69) and i >= 2:
                c = PyUnicode_READ(kind, data, i - 2)
                if 48 <= c <= 57:
                    break
        else:
            break
        i += 1
    return i


def space_end(str text, Py_ssize_t pos):
    """`_WS.match(text, pos).end()`: spaces, newlines, `\\r\\n`, line comments."""
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t i = pos
    cdef Py_UCS4 c
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if c == 32 or c == 10:
            i += 1
        elif c == 13 and i + 1 < n and PyUnicode_READ(kind, data, i + 1) == 10:
            i += 2
        elif c == 45 and i + 1 < n and PyUnicode_READ(kind, data, i + 1) == 45:
            i += 2
            while i < n and PyUnicode_READ(kind, data, i) != 10:
                i += 1
        else:
            break
    return i


def ident_part_end(str text, Py_ssize_t pos):
    """`_ID_PART.match(text, pos).end()` (isIdFirst isIdRest*), or -1 where
    the character at `pos` is no isIdFirst (the regex: no match)."""
    _check()
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t i = pos
    if i >= n or not (_flag(PyUnicode_READ(kind, data, i)) & ID_FIRST):
        return -1
    i += 1
    while i < n and (_flag(PyUnicode_READ(kind, data, i)) & ID_REST):
        i += 1
    return i


def id_first(str text, Py_ssize_t pos):
    """Whether the character at `pos` is isIdFirst (False past the end)."""
    _check()
    if pos < 0 or pos >= PyUnicode_GET_LENGTH(text):
        return False
    return bool(_flag(PyUnicode_READ(PyUnicode_KIND(text), PyUnicode_DATA(text), pos)) & ID_FIRST)


def versioned(str text, Py_ssize_t pos):
    """Whether the character at `pos` is read differently by Lean versions."""
    _check()
    if pos < 0 or pos >= PyUnicode_GET_LENGTH(text):
        return False
    return bool(_flag(PyUnicode_READ(PyUnicode_KIND(text), PyUnicode_DATA(text), pos)) & VERSIONED)


def ident_end(str text, Py_ssize_t pos):
    """core.lexchars.ident_end_py: `identFnAux` from `pos`, its end, or -2 -
    the offset where it cannot be read."""
    _check()
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_UCS4 c
    cdef Py_ssize_t opened
    while True:
        if pos >= n:  # the pure reader would index past the end: no caller does
            return -2 - pos
        c = PyUnicode_READ(kind, data, pos)
        if c == 0xAB:  # `«`: up to the next `»`
            opened = pos
            pos += 1
            while pos < n and PyUnicode_READ(kind, data, pos) != 0xBB:
                pos += 1
            if pos >= n:
                return -2 - opened
            pos += 1
        else:
            if not (_flag(c) & ID_FIRST):
                return -2 - pos
            pos += 1
            while pos < n and (_flag(PyUnicode_READ(kind, data, pos)) & ID_REST):
                pos += 1
        if pos + 1 < n and PyUnicode_READ(kind, data, pos) == 46:  # `.`: isIdCont
            c = PyUnicode_READ(kind, data, pos + 1)
            if c == 0xAB or (_flag(c) & ID_FIRST):
                pos += 1
                continue
        if pos < n and (_flag(PyUnicode_READ(kind, data, pos)) & VERSIONED):
            return -2 - pos
        return pos

