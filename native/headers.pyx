# cython: wraparound=True, boundscheck=True, annotation_typing=False
# Compiles the pure-Python header splitter unchanged: one source, two builds
# (leanrpc.core.headers_py and leanrpc._native.headers), so they cannot drift.
# Splitting runs once per request on the first lines of a snippet; it is not
# hot enough to justify a second, hand-typed implementation.
include "../server/leanrpc/core/headers_py.py"
