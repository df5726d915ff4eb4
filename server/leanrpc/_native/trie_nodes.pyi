"""Type stubs for leanrpc._native.trie_nodes (native/trie_nodes.pyx).

No Python API: the module exports C functions that leanrpc._native.trie
cimports (declared in trie_nodes.pxd).
"""
