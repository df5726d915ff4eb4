"""Header/body split of Lean snippets (facade).

Loads leanrpc._native.headers, or the pure twin leanrpc.core.headers_py
under LEANRPC_NO_EXTENSIONS=1. Both come from the same source file.
"""

from ._impl import extensions_disabled

if extensions_disabled():
    from .headers_py import HeaderSplit, decided_by, doc_closes, split_header

    IMPLEMENTATION = "python"
else:
    from .._native.headers import HeaderSplit, decided_by, doc_closes, split_header

    IMPLEMENTATION = "native"

__all__ = ["IMPLEMENTATION", "HeaderSplit", "decided_by", "doc_closes", "split_header"]
