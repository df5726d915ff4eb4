# cython: language_level=3
"""Compiled twin of leanrpc.policy.lexer.positions: the offsets of every
occurrence of some needles, in one pass over the text.

The code policy runs on every snippet; in pure Python its cost is one
str.find pass per needle over the whole text (about 20 passes). Here one pass
looks each character up with the one after it in a table of the needles'
first two characters, and compares only where some needle starts so. The
tables are built once per needle tuple and kept (`_compiled`). Same API and
same answers as the pure function (tests/native/test_native_policy.py).
"""

from cpython.unicode cimport PyUnicode_READ, PyUnicode_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH
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


cdef class _Needles:
    """The needles as tables: their characters, which start with each ASCII
    character, and which ASCII pairs some needle starts with."""

    cdef Py_UCS4 chars[MAX_NEEDLES][MAX_NEEDLE]
    cdef Py_ssize_t lengths[MAX_NEEDLES]
    cdef int by_first[128][MAX_NEEDLES]
    cdef int n_first[128]
    # Whether some needle starts with this ASCII pair (or is one character
    # long, or has a non-ASCII second character): most characters are
    # dismissed by one lookup of the pair they start.
    cdef unsigned char pair[128][128]
    cdef Py_ssize_t count
    cdef bint any_wide  # a needle starting with a non-ASCII character

    def __cinit__(self, tuple needles):
        cdef Py_ssize_t j, k, m
        cdef Py_UCS4 first
        self.count = len(needles)
        if self.count > MAX_NEEDLES:
            raise ValueError(f"at most {MAX_NEEDLES} needles")
        self.any_wide = False
        memset(self.n_first, 0, sizeof(self.n_first))
        memset(self.pair, 0, sizeof(self.pair))
        for k in range(self.count):
            needle = needles[k]
            m = len(needle)
            if m == 0 or m > MAX_NEEDLE:
                raise ValueError(f"needles are 1 to {MAX_NEEDLE} characters")
            self.lengths[k] = m
            for j in range(m):
                self.chars[k][j] = ord(needle[j])
            first = self.chars[k][0]
            if first < 128:
                self.by_first[first][self.n_first[first]] = <int>k
                self.n_first[first] += 1
                if m == 1 or self.chars[k][1] >= 128:
                    for j in range(128):
                        self.pair[first][j] = 1
                else:
                    self.pair[first][self.chars[k][1]] = 1
            else:
                self.any_wide = True

    cdef list find(self, str text, object until):
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef Py_ssize_t stop, i, k
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef Py_UCS4 c, d
        cdef int t
        cdef list found = []
        if n == 0 or self.count == 0:
            return found
        stop = n if until is None else min(n, <Py_ssize_t>until)
        for i in range(stop):
            c = PyUnicode_READ(kind, data, i)
            if c < 128:  # the needles that start with it
                if self.n_first[c] == 0:
                    continue
                if i + 1 < n:
                    d = PyUnicode_READ(kind, data, i + 1)
                    if d < 128 and not self.pair[c][d]:
                        continue
                for t in range(self.n_first[c]):
                    k = self.by_first[c][t]
                    if _starts_with(kind, data, n, i, self.chars[k], self.lengths[k]):
                        found.append(i)
            elif self.any_wide:  # a non-ASCII first character: every needle
                for k in range(self.count):
                    if c == self.chars[k][0] and _starts_with(kind, data, n, i, self.chars[k], self.lengths[k]):
                        found.append(i)
        return found


cdef dict _compiled = {}


def positions(str text, tuple needles, until=None):
    """Sorted offsets of every occurrence of each needle (starting before `until`)."""
    cdef _Needles table = _compiled.get(needles)
    if table is None:
        table = _Needles(needles)
        if len(_compiled) < 64:  # the policy's few tuples; a caller's random ones are not kept
            _compiled[needles] = table
    return table.find(text, until)
