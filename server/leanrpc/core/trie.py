"""Compressed prefix trie over command texts (facade).

Loads leanrpc._native.trie, or the pure twin leanrpc.core.trie_py under
LEANRPC_NO_EXTENSIONS=1.
"""

from ._impl import extensions_disabled

if extensions_disabled():
    from .trie_py import PrefixTrie

    IMPLEMENTATION = "python"
else:
    from .._native.trie import PrefixTrie

    IMPLEMENTATION = "native"

__all__ = ["IMPLEMENTATION", "PrefixTrie"]
