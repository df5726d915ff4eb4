# Code points of str data of any width (PEP 393), read, written and compared.
#
# Part of the compiled prefix trie (native/trie.pyx, native/trie_nodes.pyx).
# Inline only: every function here is compiled into each module that cimports
# it, so the lookup path makes no call through a module's function table and
# no runtime module leanrpc._native.trie_text exists.
# Owns: reading a code point of width 1, 2 or 4; the length of the common
# prefix of two code point arrays; equality. May cimport: libc, Python.h.

from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy

cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    ctypedef unsigned short Py_UCS2
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    object PyUnicode_FromKindAndData(int kind, const void* data, Py_ssize_t size)


cdef inline Py_UCS4 ucs_read(int kind, const char* data, Py_ssize_t index) noexcept nogil:
    if kind == 1:
        return (<const Py_UCS1*>data)[index]
    if kind == 2:
        return (<const Py_UCS2*>data)[index]
    return (<const Py_UCS4*>data)[index]


cdef inline void ucs_write(int kind, char* data, Py_ssize_t index, Py_UCS4 value) noexcept nogil:
    if kind == 1:
        (<Py_UCS1*>data)[index] = <Py_UCS1>value
    elif kind == 2:
        (<Py_UCS2*>data)[index] = <Py_UCS2>value
    else:
        (<Py_UCS4*>data)[index] = value


ctypedef fused _ucs_a:
    Py_UCS1
    Py_UCS2
    Py_UCS4


ctypedef fused _ucs_b:
    Py_UCS1
    Py_UCS2
    Py_UCS4


cdef inline Py_ssize_t _common_mixed(const _ucs_a* a, const _ucs_b* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    while i < n and <Py_UCS4>a[i] == <Py_UCS4>b[i]:
        i += 1
    return i


cdef inline Py_ssize_t _common_bytes(const char* a, const char* b, Py_ssize_t n) noexcept nogil:
    # Index of the first differing byte (n if none), eight bytes at a time.
    cdef Py_ssize_t i = 0
    cdef uint64_t x = 0, y = 0
    while i + 8 <= n:
        memcpy(&x, a + i, 8)
        memcpy(&y, b + i, 8)
        if x != y:
            break
        i += 8
    while i < n and a[i] == b[i]:
        i += 1
    return i


cdef inline Py_ssize_t ucs_common(int ka, const char* a, int kb, const char* b,
                                  Py_ssize_t n) noexcept nogil:
    # The number of equal leading code points of a[:n] and b[:n].
    if ka == kb:
        return _common_bytes(a, b, n * ka) // ka
    if ka == 1:
        if kb == 2:
            return _common_mixed(<const Py_UCS1*>a, <const Py_UCS2*>b, n)
        return _common_mixed(<const Py_UCS1*>a, <const Py_UCS4*>b, n)
    if ka == 2:
        if kb == 1:
            return _common_mixed(<const Py_UCS2*>a, <const Py_UCS1*>b, n)
        return _common_mixed(<const Py_UCS2*>a, <const Py_UCS4*>b, n)
    if kb == 1:
        return _common_mixed(<const Py_UCS4*>a, <const Py_UCS1*>b, n)
    return _common_mixed(<const Py_UCS4*>a, <const Py_UCS2*>b, n)


cdef inline bint ucs_equal(int ka, const char* a, int kb, const char* b,
                           Py_ssize_t n) noexcept nogil:
    if ka == kb:
        return memcmp(a, b, <size_t>(n * ka)) == 0
    return ucs_common(ka, a, kb, b, n) == n
