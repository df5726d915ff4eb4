# cython: language_level=3
"""Compiled twin of leanrpc.policy.lexer.positions: the offsets of every
occurrence of some needles, in one pass over the text.

The code policy runs on every snippet; in pure Python its cost is one
str.find pass per needle over the whole text (about 14 passes). Here one pass
checks each character against the needles' first characters. Same API and
same answers as the pure function (tests/native/test_native_policy.py).
"""

from cpython.unicode cimport PyUnicode_READ, PyUnicode_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH
from libc.stdlib cimport malloc, free
from libc.string cimport memset

DEF MAX_NEEDLES = 64
DEF MAX_NEEDLE = 64


cdef inline bint _starts_with(int kind, void *data, Py_ssize_t n, Py_ssize_t i, Py_UCS4 *needle,
                              Py_ssize_t m) noexcept:
    """Whether the text (kind, data, length n) holds `needle` (m characters) at i."""
    cdef Py_ssize_t j
    if i + m > n:
        return False
    for j in range(m):
        if PyUnicode_READ(kind, data, i + j) != needle[j]:
            return False
    return True


def positions(str text, tuple needles, until=None):
    """Sorted offsets of every occurrence of each needle (starting before `until`)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef Py_ssize_t stop, i, j, k, m
    cdef Py_ssize_t count = len(needles)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_UCS4 c
    cdef Py_UCS4 chars[MAX_NEEDLES][MAX_NEEDLE]
    cdef Py_ssize_t lengths[MAX_NEEDLES]
    cdef int by_first[128][MAX_NEEDLES]  # needles starting with an ASCII char
    cdef int n_first[128]
    # Whether some needle starts with this ASCII pair (or is one character
    # long, or has a non-ASCII second character): most characters are
    # dismissed by one lookup of the pair they start.
    cdef unsigned char pair[128][128]
    cdef Py_UCS4 d
    cdef int t
    cdef list found = []
    if count > MAX_NEEDLES:
        raise ValueError(f"at most {MAX_NEEDLES} needles")
    cdef bint any_wide = False  # a needle starting with a non-ASCII character
    memset(n_first, 0, sizeof(n_first))
    memset(pair, 0, sizeof(pair))
    for k in range(count):
        needle = needles[k]
        m = len(needle)
        if m == 0 or m > MAX_NEEDLE:
            raise ValueError(f"needles are 1 to {MAX_NEEDLE} characters")
        lengths[k] = m
        for j in range(m):
            chars[k][j] = ord(needle[j])
        if chars[k][0] < 128:
            by_first[chars[k][0]][n_first[chars[k][0]]] = <int>k
            n_first[chars[k][0]] += 1
            if m == 1 or chars[k][1] >= 128:
                for j in range(128):
                    pair[chars[k][0]][j] = 1
            else:
                pair[chars[k][0]][chars[k][1]] = 1
        else:
            any_wide = True
    if n == 0 or count == 0:
        return found
    stop = n if until is None else min(n, <Py_ssize_t>until)
    for i in range(stop):
        c = PyUnicode_READ(kind, data, i)
        if c < 128:  # the needles that start with it
            if n_first[c] == 0:
                continue
            if i + 1 < n:
                d = PyUnicode_READ(kind, data, i + 1)
                if d < 128 and not pair[c][d]:
                    continue
            for t in range(n_first[c]):
                k = by_first[c][t]
                if _starts_with(kind, data, n, i, chars[k], lengths[k]):
                    found.append(i)
        elif any_wide:  # a non-ASCII first character: every needle
            for k in range(count):
                if c == chars[k][0] and _starts_with(kind, data, n, i, chars[k], lengths[k]):
                    found.append(i)
    return found
