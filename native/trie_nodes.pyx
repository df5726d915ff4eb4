"""The prefix trie's node blocks: allocate, grow, link, split, merge, free.

The module leanrpc._native.trie_nodes.

The layout, the inline accessors and the child search are declared in
server/leanrpc/_native/trie_nodes.pxd (read its header); native/trie.pyx
cimports both. These operations run on insert and remove only, never on a
lookup. Any of them that may move a block returns the block's new address.

Owns: the life of node blocks (PyMem). Knows nothing of payloads, clocks or
the trie's scratch paths.
May cimport: leanrpc._native.trie_text, leanrpc._native.trie_nodes (its own
declarations), cpython.mem and libc.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.string cimport memcpy, memmove

from leanrpc._native.trie_text cimport ucs_read, ucs_write

__all__ = []


cdef inline size_t _block_size(Py_ssize_t capacity, size_t label_bytes) noexcept nogil:
    return sizeof(Node) + <size_t>capacity * sizeof(Entry) + label_bytes


cdef Node* new_node(int kind, const char* label, Py_ssize_t length,
                    Py_ssize_t capacity) except NULL:
    cdef Node* node = <Node*>PyMem_Malloc(_block_size(capacity, <size_t>(length * kind)))
    if node == NULL:
        raise MemoryError()
    node.length = length
    node.nchildren = 0
    node.capacity = capacity
    node.stamp = -1
    node.best_stamp = -1
    node.slot = -1
    node.best_slot = -1
    node.kind = kind
    node.terminal = False
    if length and label != NULL:
        memcpy(node_label(node), label, <size_t>(length * kind))
    return node


cdef Node* grow(Node* node, Py_ssize_t capacity) except NULL:
    cdef Py_ssize_t old_capacity = node.capacity
    cdef size_t label_bytes = <size_t>(node.length * node.kind)
    cdef Node* grown = <Node*>PyMem_Realloc(node, _block_size(capacity, label_bytes))
    if grown == NULL:
        raise MemoryError()
    grown.capacity = capacity
    if label_bytes:
        memmove(node_label(grown), <char*>(node_entries(grown) + old_capacity), label_bytes)
    return grown


cdef Node* add_child(Node* node, Node* child) except NULL:
    cdef Py_UCS4 first = first_code_point(child)
    cdef Py_ssize_t i
    cdef Entry* entries
    if node.nchildren == node.capacity:
        node = grow(node, 2 if node.capacity < 2 else 2 * node.capacity)
    entries = node_entries(node)
    i = node.nchildren
    while i > 0 and entries[i - 1].first > first:
        entries[i] = entries[i - 1]
        i -= 1
    entries[i].first = first
    entries[i].child = child
    node.nchildren += 1
    return node


cdef void remove_child_at(Node* node, Py_ssize_t index) noexcept nogil:
    cdef Entry* entries = node_entries(node)
    cdef size_t after = <size_t>(node.nchildren - index - 1) * sizeof(Entry)
    memmove(entries + index, entries + index + 1, after)
    node.nchildren -= 1


cdef Node* split_child(Node** link, Py_ssize_t common) except NULL:
    # `*link` keeps label[:common] and gets one child, `rest`, which takes
    # over the remainder of the label, the key ending there and the subtree.
    # `*link` is updated if the block moves; returns it.
    cdef Node* child = link[0]
    cdef Node* rest
    if child.capacity < 1:
        child = grow(child, 2)
        link[0] = child
    rest = new_node(child.kind, node_label(child) + common * child.kind, child.length - common,
                    child.nchildren)
    memcpy(node_entries(rest), node_entries(child), <size_t>child.nchildren * sizeof(Entry))
    rest.nchildren = child.nchildren
    rest.terminal = child.terminal
    rest.stamp = child.stamp
    rest.slot = child.slot
    rest.best_stamp = child.best_stamp
    rest.best_slot = child.best_slot
    child.length = common  # the label stays in place, shortened
    child.nchildren = 0
    child.terminal = False
    child.stamp = -1
    child.slot = -1
    add_child(child, rest)  # capacity >= 1: never moves
    return child


cdef Node* merge_with_only_child(Node* node) except NULL:
    # Path compression: a non-terminal node with one child and the child
    # become one node; both blocks are freed. Returns the merged node.
    cdef Node* child = node_entries(node)[0].child
    cdef int kind = node.kind if node.kind > child.kind else child.kind
    cdef Node* merged = new_node(kind, NULL, node.length + child.length, child.nchildren)
    cdef char* label = node_label(merged)
    cdef Py_ssize_t i
    if node.kind == kind:
        memcpy(label, node_label(node), <size_t>(node.length * kind))
    else:
        for i in range(node.length):
            ucs_write(kind, label, i, ucs_read(node.kind, node_label(node), i))
    if child.kind == kind:
        memcpy(label + node.length * kind, node_label(child), <size_t>(child.length * kind))
    else:
        for i in range(child.length):
            ucs_write(kind, label, node.length + i, ucs_read(child.kind, node_label(child), i))
    memcpy(node_entries(merged), node_entries(child), <size_t>child.nchildren * sizeof(Entry))
    merged.nchildren = child.nchildren
    merged.terminal = child.terminal
    merged.stamp = child.stamp
    merged.slot = child.slot
    merged.best_stamp = child.best_stamp
    merged.best_slot = child.best_slot
    PyMem_Free(child)
    PyMem_Free(node)
    return merged


cdef void recompute_best(Node* node) noexcept nogil:
    cdef long long stamp = node.stamp if node.terminal else -1
    cdef Py_ssize_t slot = node.slot if node.terminal else -1
    cdef Entry* entries = node_entries(node)
    cdef Py_ssize_t i
    for i in range(node.nchildren):
        if entries[i].child.best_stamp > stamp:
            stamp = entries[i].child.best_stamp
            slot = entries[i].child.best_slot
    node.best_stamp = stamp
    node.best_slot = slot


cdef void free_tree(Node* root) noexcept:
    cdef Node** stack
    cdef Py_ssize_t size = 1, capacity = 64, i
    cdef Node* node
    cdef Node** grown
    if root == NULL:
        return
    stack = <Node**>PyMem_Malloc(<size_t>capacity * sizeof(Node*))
    if stack == NULL:
        return  # leak rather than crash; cannot raise from a deallocator
    stack[0] = root
    while size:
        size -= 1
        node = stack[size]
        if size + node.nchildren > capacity:
            capacity = 2 * (size + node.nchildren)
            grown = <Node**>PyMem_Realloc(stack, <size_t>capacity * sizeof(Node*))
            if grown == NULL:
                break
            stack = grown
        for i in range(node.nchildren):
            stack[size] = node_entries(node)[i].child
            size += 1
        PyMem_Free(node)
    PyMem_Free(stack)
