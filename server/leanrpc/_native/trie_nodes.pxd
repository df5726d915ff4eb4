# The prefix trie's node blocks: their layout, and the operations on them.
#
# A lookup in a large trie is bound by memory latency, not by instructions,
# so each node is one C block:
#
#     Node header | Entry[capacity] (first code point, child) | label code points
#
# A step down the tree touches one block: the children's first code points
# and the edge label sit next to the header. Labels keep the width (1, 2 or 4
# bytes per code point, PEP 393) of the key they were cut from.
#
# Owns: the Node and Entry structs, the inline accessors, child search and
# label comparisons used on every lookup (here), and the operations that allocate, grow, link, merge
# and free blocks (native/trie_nodes.pyx, the module leanrpc._native.trie_nodes).
# Payloads are not here: nodes hold slot numbers into the trie's Python list.
# May cimport: leanrpc._native.trie_text, libc.

from leanrpc._native.trie_text cimport ucs_common, ucs_equal, ucs_read


cdef struct Node


ctypedef struct Entry:
    Py_UCS4 first           # first code point of the child's label
    Node* child


cdef struct Node:
    Py_ssize_t length       # label length in code points ("" for the root)
    Py_ssize_t nchildren
    Py_ssize_t capacity     # room for entries in this block
    long long stamp         # insertion clock of the key ending here, -1 if none
    long long best_stamp    # newest insertion clock in the subtree, -1 if empty
    Py_ssize_t slot         # index of this key's payload in _payloads, -1 if none
    Py_ssize_t best_slot    # payload index of the newest key in the subtree
    int kind                # label bytes per code point
    bint terminal           # a stored key ends here
    # Entry[capacity] and then the label follow the header.


cdef inline Entry* node_entries(Node* node) noexcept nogil:
    return <Entry*>(<char*>node + sizeof(Node))


cdef inline char* node_label(Node* node) noexcept nogil:
    return <char*>(node_entries(node) + node.capacity)


cdef inline Py_ssize_t find_child(Node* node, Py_UCS4 first) noexcept nogil:
    # Index of the child whose label starts with `first`, or -1.
    cdef Entry* entries = node_entries(node)
    cdef Py_ssize_t lo = 0, hi = node.nchildren, mid
    if hi <= 8:
        while lo < hi:
            if entries[lo].first == first:
                return lo
            lo += 1
        return -1
    while lo < hi:
        mid = (lo + hi) >> 1
        if entries[mid].first < first:
            lo = mid + 1
        else:
            hi = mid
    if lo < node.nchildren and entries[lo].first == first:
        return lo
    return -1


cdef inline Py_UCS4 first_code_point(Node* node) noexcept nogil:
    return ucs_read(node.kind, node_label(node), 0)


cdef inline bint label_starts(Node* node, int kind, const char* data,
                              Py_ssize_t size) noexcept nogil:
    # Whether the node's whole label starts data[:size] (code points `kind` bytes wide).
    return node.length <= size and ucs_equal(node.kind, node_label(node), kind, data, node.length)


cdef inline Py_ssize_t label_common(Node* node, int kind, const char* data,
                                    Py_ssize_t size) noexcept nogil:
    # The number of leading code points the node's label shares with data[:size].
    return ucs_common(node.kind, node_label(node), kind, data, min(node.length, size))


# Defined in native/trie_nodes.pyx. A function that may move a block returns
# its new address; the caller re-links it.
cdef Node* new_node(int kind, const char* label, Py_ssize_t length,
                    Py_ssize_t capacity) except NULL
cdef Node* grow(Node* node, Py_ssize_t capacity) except NULL
cdef Node* add_child(Node* node, Node* child) except NULL
cdef void remove_child_at(Node* node, Py_ssize_t index) noexcept nogil
cdef Node* split_child(Node** link, Py_ssize_t common) except NULL
cdef Node* merge_with_only_child(Node* node) except NULL
cdef void recompute_best(Node* node) noexcept nogil
cdef void free_tree(Node* root) noexcept
