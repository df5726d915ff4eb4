# cython: language_level=3
"""Compiled twin of leanrpc.core.needles.positions: the offsets of every
occurrence of some needles, in one pass over the text.

The code policy runs on every snippet; in pure Python its cost is one
str.find pass per needle over the whole text (about 30 passes). Here one pass
looks each character up with the one after it in a table of the needles'
first two characters, and compares only where some needle starts so; the
pass is compiled once per storage width of the text (a fused type), so each
character is read by a plain array access. The
tables are built once per needle tuple and kept (`_compiled`). Same API and
same answers as the pure function (tests/native/test_native_policy.py).
"""

from cpython.unicode cimport (
    PyUnicode_1BYTE_KIND,
    PyUnicode_2BYTE_KIND,
    PyUnicode_DATA,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
)
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.string cimport memset

DEF MAX_NEEDLES = 64
DEF MAX_NEEDLE = 64
DEF ALL_THIRD = 0xFFFFFFFFFFFFFFFF


cdef class _Needles:
    """The needles as tables: their characters, which start with each ASCII
    character, and which ASCII pairs some needle starts with."""

    cdef Py_UCS4 chars[MAX_NEEDLES][MAX_NEEDLE]
    cdef Py_ssize_t lengths[MAX_NEEDLES]
    cdef int by_first[128][MAX_NEEDLES]
    cdef int n_first[128]
    # Whether some needle starts with this pair of characters, index 128
    # standing for every non-ASCII character (a one-character needle: every
    # second character): each position is dismissed or kept by one lookup,
    # with no branch on the characters themselves. The entry (0: none) picks
    # the pair's mask of third characters (`_bit`; every bit for a needle of
    # one or two characters): common pairs such as `in` or `se` start words
    # no needle continues, and are dismissed by one more lookup.
    cdef unsigned char pair[129][129]
    cdef unsigned long long third[256]
    cdef Py_ssize_t count
    cdef bint any_wide  # a needle starting with a non-ASCII character

    def __cinit__(self, tuple needles):
        cdef Py_ssize_t j, k, m
        cdef Py_UCS4 first
        cdef unsigned long long mask
        self.count = len(needles)
        if self.count > MAX_NEEDLES:
            raise ValueError(f"at most {MAX_NEEDLES} needles")
        self.any_wide = False
        memset(self.n_first, 0, sizeof(self.n_first))
        memset(self.pair, 0, sizeof(self.pair))
        masks = {}  # (first, second) -> mask of third characters
        for k in range(self.count):
            needle = needles[k]
            m = len(needle)
            if m == 0 or m > MAX_NEEDLE:
                raise ValueError(f"needles are 1 to {MAX_NEEDLE} characters")
            self.lengths[k] = m
            for j in range(m):
                self.chars[k][j] = ord(needle[j])
            first = self.chars[k][0]
            if first >= 128:
                self.any_wide = True
                continue
            self.by_first[first][self.n_first[first]] = <int>k
            self.n_first[first] += 1
            mask = ALL_THIRD if m <= 2 else ((<unsigned long long>1) << _bit(self.chars[k][2]))
            for j in (range(129) if m == 1 else (_ascii(self.chars[k][1]),)):
                masks[first, j] = masks.get((first, j), 0) | mask
        ids = {}  # one entry per distinct mask (at most 2 per needle: <= 255)
        for (first, j), mask in masks.items():
            if mask not in ids:
                ids[mask] = len(ids) + 1
                self.third[ids[mask]] = mask
            self.pair[first][j] = ids[mask]

    cdef list find(self, str text, object until):
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef Py_ssize_t stop
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef list found = []
        if n == 0 or self.count == 0:
            return found
        stop = n if until is None else min(n, <Py_ssize_t>until)
        # One loop per storage width (PEP 393): the character read is a plain
        # array access, not a switch on the kind per character.
        if kind == PyUnicode_1BYTE_KIND:
            _scan(self, <uint8_t *>data, n, stop, found)
        elif kind == PyUnicode_2BYTE_KIND:
            _scan(self, <uint16_t *>data, n, stop, found)
        else:
            _scan(self, <uint32_t *>data, n, stop, found)
        return found


cdef inline unsigned int _bit(Py_UCS4 c) noexcept:
    """A third character's bit in a pair's mask: ASCII folded onto 63 bits, 63
    for every other character (a filter: a set bit is checked in full)."""
    return (<unsigned int>c) % 63 if c < 128 else 63


cdef inline Py_ssize_t _ascii(Py_UCS4 c) noexcept:
    """The pair table's index of a character: itself if ASCII, else 128."""
    return c if c < 128 else 128


ctypedef fused _unit:  # Py_UCS1, Py_UCS2, Py_UCS4
    uint8_t
    uint16_t
    uint32_t


cdef inline bint _here(_unit *data, Py_ssize_t n, Py_ssize_t i, Py_UCS4 *needle,
                       Py_ssize_t m) noexcept:
    """Whether `needle` (m characters) starts at i of data (n characters)."""
    cdef Py_ssize_t j
    if i + m > n:
        return False
    for j in range(1, m):  # the first character is checked by the caller
        if <Py_UCS4>data[i + j] != needle[j]:
            return False
    return True


cdef int _scan(_Needles table, _unit *data, Py_ssize_t n, Py_ssize_t stop, list found) except -1:
    """Appends to `found` every i < stop where some needle starts, in order."""
    cdef Py_ssize_t i, k, paired, a, b
    cdef Py_UCS4 c
    cdef int t
    cdef unsigned char p
    if table.any_wide:  # a needle starting with a non-ASCII character: the plain way
        for i in range(stop):
            for k in range(table.count):
                if data[i] == table.chars[k][0] and _here(data, n, i, table.chars[k], table.lengths[k]):
                    found.append(i)
        return 0
    # Every position with a character after it: one lookup of the pair, and
    # where a needle starts so, one of the third character.
    paired = stop if stop < n else n - 1
    a = _ascii(data[0]) if paired > 0 else 0
    for i in range(paired):
        b = _ascii(data[i + 1])  # this pair's second is the next pair's first
        p = table.pair[a][b]
        a = b
        if p == 0:
            continue
        if i + 2 < n and not ((table.third[p] >> _bit(data[i + 2])) & 1):
            continue
        c = data[i]
        for t in range(table.n_first[c]):
            k = table.by_first[c][t]
            if _here(data, n, i, table.chars[k], table.lengths[k]):
                found.append(i)
    if paired < stop:  # the last character: only a one-character needle fits
        c = data[paired]
        if c < 128:
            for t in range(table.n_first[c]):
                k = table.by_first[c][t]
                if _here(data, n, paired, table.chars[k], table.lengths[k]):
                    found.append(paired)
    return 0


cdef dict _compiled = {}


def positions(str text, tuple needles, until=None):
    """Sorted offsets of every occurrence of each needle (starting before `until`)."""
    cdef _Needles table = _compiled.get(needles)
    if table is None:
        table = _Needles(needles)
        if len(_compiled) < 64:  # the policy's few tuples; a caller's random ones are not kept
            _compiled[needles] = table
    return table.find(text, until)
