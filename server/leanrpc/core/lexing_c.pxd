# The compiled build of core/lexing.py (leanrpc.core.lexing_c, setup.py): `Lexer` as a C-level
# class. Cython reads these declarations beside the unchanged Python source (an augmenting
# .pxd, found by the module's full name): the lexer's state lives in typed fields and its
# per-token methods are called through the class's C table, not looked up by name, while
# every line of the source keeps the interpreter's semantics (the interpreted build runs the
# same file; tests/native/test_native_lexing.py holds the two to the same tokens and errors).
# Issue 38 item 6: the mask of the axiom plan spent most of its lexing time on attribute and
# method lookups (benchmarks/RESULTS.md). The fields are `public`: the policy's reader and the
# tests read them from Python.

cdef class Lexer:
    cdef public str text
    cdef public Py_ssize_t n
    cdef public list out
    cdef public Py_ssize_t pos
    cdef public object marks
    cdef public Py_ssize_t mark
    cdef public Py_ssize_t run_end
    cdef public list after_hole

    cpdef fill(self, Py_ssize_t offset)
    cpdef step(self, bint skip)
    cpdef Py_ssize_t whitespace(self, Py_ssize_t pos) except -1
    cpdef Py_ssize_t emit(self, str kind, Py_ssize_t start, Py_ssize_t end) except -1
    cpdef Py_ssize_t token(self, Py_ssize_t pos, str c) except -1
