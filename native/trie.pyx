"""A compressed prefix trie over str keys, compiled (leanrpc._native.trie).

Same API and behaviour as the pure twin leanrpc.core.trie_py (read its
docstring); tests/native runs every test on both.

Layout. A lookup in a large trie is bound by memory latency, not by
instructions, so each node is one C block:

    Node header | Entry[capacity] (first code point, child) | label code points

A step down the tree touches one block: the children's first code points
and the edge label sit next to the header. Labels keep the width (1, 2 or
4 bytes per code point, PEP 393) of the key they were cut from, so Lean
text, which is almost always 2 bytes wide, is compared with memcmp; keys of
mixed widths fall back to a typed loop.

Payloads live in a Python list (`_payloads`) that nodes index, so the
garbage collector sees them and cycles through a payload are collected.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy, memmove

cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    ctypedef unsigned short Py_UCS2
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    object PyUnicode_FromKindAndData(int kind, const void* data, Py_ssize_t size)

__all__ = ["PrefixTrie"]


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


cdef inline Entry* _entries(Node* node) noexcept nogil:
    return <Entry*>(<char*>node + sizeof(Node))


cdef inline char* _label(Node* node) noexcept nogil:
    return <char*>(_entries(node) + node.capacity)


cdef inline Py_UCS4 _read(int kind, const char* data, Py_ssize_t index) noexcept nogil:
    if kind == 1:
        return (<const Py_UCS1*>data)[index]
    if kind == 2:
        return (<const Py_UCS2*>data)[index]
    return (<const Py_UCS4*>data)[index]


cdef inline void _write(int kind, char* data, Py_ssize_t index, Py_UCS4 value) noexcept nogil:
    if kind == 1:
        (<Py_UCS1*>data)[index] = <Py_UCS1>value
    elif kind == 2:
        (<Py_UCS2*>data)[index] = <Py_UCS2>value
    else:
        (<Py_UCS4*>data)[index] = value


# -- comparing code points of any widths -------------------------------------------

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


cdef Py_ssize_t _common_bytes(const char* a, const char* b, Py_ssize_t n) noexcept nogil:
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


cdef Py_ssize_t _common(int ka, const char* a, int kb, const char* b, Py_ssize_t n) noexcept nogil:
    """The number of equal leading code points of a[:n] and b[:n]."""
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


cdef inline bint _equal(int ka, const char* a, int kb, const char* b, Py_ssize_t n) noexcept nogil:
    if ka == kb:
        return memcmp(a, b, <size_t>(n * ka)) == 0
    return _common(ka, a, kb, b, n) == n


# -- node blocks -------------------------------------------------------------------


cdef Node* _new_node(int kind, const char* label, Py_ssize_t length, Py_ssize_t capacity) except NULL:
    cdef Node* node = <Node*>PyMem_Malloc(sizeof(Node) + <size_t>capacity * sizeof(Entry) + <size_t>(length * kind))
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
        memcpy(_label(node), label, <size_t>(length * kind))
    return node


cdef Node* _grow(Node* node, Py_ssize_t capacity) except NULL:
    # Returns the node's new address; the caller re-links it.
    cdef Py_ssize_t old_capacity = node.capacity
    cdef size_t label_bytes = <size_t>(node.length * node.kind)
    cdef Node* grown = <Node*>PyMem_Realloc(node, sizeof(Node) + <size_t>capacity * sizeof(Entry) + label_bytes)
    if grown == NULL:
        raise MemoryError()
    grown.capacity = capacity
    if label_bytes:
        memmove(_label(grown), <char*>(_entries(grown) + old_capacity), label_bytes)
    return grown


cdef inline Py_ssize_t _find(Node* node, Py_UCS4 first) noexcept nogil:
    # Index of the child whose label starts with `first`, or -1.
    cdef Entry* entries = _entries(node)
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


cdef Node* _add_child(Node* node, Node* child) except NULL:
    # Returns the parent's (possibly new) address.
    cdef Py_UCS4 first = _read(child.kind, _label(child), 0)
    cdef Py_ssize_t i
    cdef Entry* entries
    if node.nchildren == node.capacity:
        node = _grow(node, 2 if node.capacity < 2 else 2 * node.capacity)
    entries = _entries(node)
    i = node.nchildren
    while i > 0 and entries[i - 1].first > first:
        entries[i] = entries[i - 1]
        i -= 1
    entries[i].first = first
    entries[i].child = child
    node.nchildren += 1
    return node


cdef void _remove_child_at(Node* node, Py_ssize_t index) noexcept nogil:
    cdef Entry* entries = _entries(node)
    memmove(entries + index, entries + index + 1, <size_t>(node.nchildren - index - 1) * sizeof(Entry))
    node.nchildren -= 1


cdef Node* _merge_with_only_child(Node* node) except NULL:
    # Path compression: a non-terminal node with one child and the child
    # become one node; both blocks are freed. Returns the merged node.
    cdef Node* child = _entries(node)[0].child
    cdef int kind = node.kind if node.kind > child.kind else child.kind
    cdef Node* merged = _new_node(kind, NULL, node.length + child.length, child.nchildren)
    cdef char* label = _label(merged)
    cdef Py_ssize_t i
    if node.kind == kind:
        memcpy(label, _label(node), <size_t>(node.length * kind))
    else:
        for i in range(node.length):
            _write(kind, label, i, _read(node.kind, _label(node), i))
    if child.kind == kind:
        memcpy(label + node.length * kind, _label(child), <size_t>(child.length * kind))
    else:
        for i in range(child.length):
            _write(kind, label, node.length + i, _read(child.kind, _label(child), i))
    memcpy(_entries(merged), _entries(child), <size_t>child.nchildren * sizeof(Entry))
    merged.nchildren = child.nchildren
    merged.terminal = child.terminal
    merged.stamp = child.stamp
    merged.slot = child.slot
    merged.best_stamp = child.best_stamp
    merged.best_slot = child.best_slot
    PyMem_Free(child)
    PyMem_Free(node)
    return merged


cdef void _recompute_best(Node* node) noexcept nogil:
    cdef long long stamp = node.stamp if node.terminal else -1
    cdef Py_ssize_t slot = node.slot if node.terminal else -1
    cdef Entry* entries = _entries(node)
    cdef Py_ssize_t i
    for i in range(node.nchildren):
        if entries[i].child.best_stamp > stamp:
            stamp = entries[i].child.best_stamp
            slot = entries[i].child.best_slot
    node.best_stamp = stamp
    node.best_slot = slot


cdef void _free_tree(Node* root) noexcept:
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
            stack[size] = _entries(node)[i].child
            size += 1
        PyMem_Free(node)
    PyMem_Free(stack)


# -- the trie ------------------------------------------------------------------------


cdef class PrefixTrie:
    """A set of str keys with payloads, answering prefix questions.

    `insert` replaces the payload of an existing key (and makes it the most
    recently inserted). `keys()` yields keys in code-point order.
    """

    cdef Node* _root
    cdef Py_ssize_t _size
    cdef long long _clock
    cdef Py_ssize_t _version    # bumped on every change of the key set, for keys()
    cdef list _payloads         # payload of each slot; nodes hold slot numbers
    cdef list _free_slots
    cdef Node** _path           # scratch for insert/remove: the nodes passed
    cdef Node*** _links         # and the pointers that point at them
    cdef Py_ssize_t _path_capacity

    def __cinit__(self):
        self._root = _new_node(1, NULL, 0, 0)
        self._size = 0
        self._clock = 0
        self._version = 0
        self._payloads = []
        self._free_slots = []
        self._path = NULL
        self._links = NULL
        self._path_capacity = 0

    def __dealloc__(self):
        _free_tree(self._root)
        PyMem_Free(self._path)
        PyMem_Free(self._links)

    def __len__(self):
        return self._size

    def __contains__(self, key):
        return isinstance(key, str) and self._find(<str>key) != NULL

    def __iter__(self):
        return self.keys()

    def __repr__(self):
        return f"<PrefixTrie with {self._size} keys>"

    def clear(self):
        cdef Node* fresh = _new_node(1, NULL, 0, 0)
        _free_tree(self._root)
        self._root = fresh
        self._size = 0
        self._payloads = []
        self._free_slots = []
        self._version += 1

    cdef int _push(self, Py_ssize_t depth, Node* node, Node** link) except -1:
        cdef Py_ssize_t capacity
        cdef Node** path
        cdef Node*** links
        if depth >= self._path_capacity:
            capacity = 64 if self._path_capacity < 32 else 2 * self._path_capacity
            path = <Node**>PyMem_Realloc(self._path, <size_t>capacity * sizeof(Node*))
            if path == NULL:
                raise MemoryError()
            self._path = path
            links = <Node***>PyMem_Realloc(self._links, <size_t>capacity * sizeof(Node**))
            if links == NULL:
                raise MemoryError()
            self._links = links
            self._path_capacity = capacity
        self._path[depth] = node
        self._links[depth] = link
        return 0

    cdef Py_ssize_t _take_slot(self, payload) except -1:
        cdef Py_ssize_t slot
        if self._free_slots:
            slot = self._free_slots.pop()
            self._payloads[slot] = payload
        else:
            slot = len(self._payloads)
            self._payloads.append(payload)
        return slot

    def insert(self, str key not None, payload=None):
        cdef int kind = PyUnicode_KIND(key)
        cdef const char* data = <const char*>PyUnicode_DATA(key)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(key)
        cdef Py_ssize_t pos = 0, depth = 0, index, common, slot = -1, i
        cdef long long stamp
        cdef Node** link = &self._root
        cdef Node* node = self._root
        cdef Node* child
        cdef Node* rest
        cdef Node* leaf
        cdef Entry* entry
        self._clock += 1
        stamp = self._clock
        while True:
            self._push(depth, node, link)
            depth += 1
            if pos == n:
                if node.terminal:
                    slot = node.slot
                    self._payloads[slot] = payload
                else:
                    slot = self._take_slot(payload)
                    node.terminal = True
                    node.slot = slot
                    self._size += 1
                    self._version += 1
                node.stamp = stamp
                break
            index = _find(node, _read(kind, data, pos))
            if index < 0:
                leaf = _new_node(kind, data + pos * kind, n - pos, 0)
                try:
                    slot = self._take_slot(payload)
                    node = _add_child(node, leaf)
                except BaseException:
                    PyMem_Free(leaf)
                    raise
                leaf.terminal = True
                leaf.slot = slot
                leaf.stamp = stamp
                link[0] = node
                self._path[depth - 1] = node
                self._push(depth, leaf, NULL)
                depth += 1
                self._size += 1
                self._version += 1
                break
            entry = &_entries(node)[index]
            child = entry.child
            common = _common(child.kind, _label(child), kind, data + pos * kind, min(child.length, n - pos))
            if common < child.length:
                # Split: `child` keeps label[:common] and gets one child, `rest`,
                # which takes over the remainder of the label and the subtree.
                if child.capacity < 1:
                    child = _grow(child, 2)
                    entry.child = child
                rest = _new_node(child.kind, _label(child) + common * child.kind, child.length - common, child.nchildren)
                memcpy(_entries(rest), _entries(child), <size_t>child.nchildren * sizeof(Entry))
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
                _add_child(child, rest)  # capacity >= 1: never moves
            link = &entry.child
            node = child
            pos += common
        for i in range(depth):
            self._path[i].best_stamp = stamp
            self._path[i].best_slot = slot

    def remove(self, str key not None):
        """Removes `key`; returns whether it was stored."""
        cdef int kind = PyUnicode_KIND(key)
        cdef const char* data = <const char*>PyUnicode_DATA(key)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(key)
        cdef Py_ssize_t pos = 0, depth = 0, index, slot, i
        cdef Node** link = &self._root
        cdef Node* node = self._root
        cdef Node* child
        cdef Node* parent
        self._push(depth, node, link)
        depth += 1
        while pos < n:
            index = _find(node, _read(kind, data, pos))
            if index < 0:
                return False
            child = _entries(node)[index].child
            if child.length > n - pos or not _equal(child.kind, _label(child), kind, data + pos * kind, child.length):
                return False
            pos += child.length
            link = &_entries(node)[index].child
            node = child
            self._push(depth, node, link)
            depth += 1
        if not node.terminal:
            return False
        slot = node.slot
        node.terminal = False
        node.slot = -1
        node.stamp = -1
        self._payloads[slot] = None
        self._free_slots.append(slot)
        self._size -= 1
        self._version += 1
        if depth > 1:
            if node.nchildren == 0:
                parent = self._path[depth - 2]
                _remove_child_at(parent, _find(parent, _read(node.kind, _label(node), 0)))
                PyMem_Free(node)
                depth -= 1
                if depth > 1 and not parent.terminal and parent.nchildren == 1:
                    parent = _merge_with_only_child(parent)
                    self._links[depth - 1][0] = parent
                    self._path[depth - 1] = parent
            elif node.nchildren == 1:
                node = _merge_with_only_child(node)
                self._links[depth - 1][0] = node
                self._path[depth - 1] = node
        for i in range(depth - 1, -1, -1):
            _recompute_best(self._path[i])
        return True

    def get(self, key, default=None):
        cdef Node* node
        if not isinstance(key, str):
            return default
        node = self._find(<str>key)
        if node == NULL:
            return default
        return self._payloads[node.slot]

    def longest_prefix(self, str query not None):
        """The longest stored key that is a prefix of `query`: (its length, payload)."""
        cdef int kind = PyUnicode_KIND(query)
        cdef const char* data = <const char*>PyUnicode_DATA(query)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(query)
        cdef Py_ssize_t pos = 0, index, found = -1, slot = -1
        cdef Node* node = self._root
        cdef Node* child
        if node.terminal:
            found = 0
            slot = node.slot
        while pos < n:
            index = _find(node, _read(kind, data, pos))
            if index < 0:
                break
            child = _entries(node)[index].child
            if child.length > n - pos or not _equal(child.kind, _label(child), kind, data + pos * kind, child.length):
                break
            pos += child.length
            node = child
            if node.terminal:
                found = pos
                slot = node.slot
        if found < 0:
            return None
        return found, self._payloads[slot]

    def common_prefix_length(self, str query not None):
        """The length of the longest common prefix of `query` and any stored key."""
        cdef Py_ssize_t length = 0
        self._walk_common(query, &length)
        return length

    def common_prefix(self, str query not None):
        """(common_prefix_length(query), payload of the newest key sharing that prefix).

        None when the trie is empty.
        """
        cdef Py_ssize_t length = 0
        cdef Node* node = self._walk_common(query, &length)
        if node.best_stamp < 0:
            return None
        return length, self._payloads[node.best_slot]

    def keys(self):
        """Yields the stored keys in code-point order.

        Raises RuntimeError if the trie's keys change during iteration.
        """
        cdef Py_ssize_t version = self._version
        cdef list stack = [(<size_t>self._root, "")]
        cdef Node* node
        cdef Node* child
        cdef str prefix
        cdef Py_ssize_t i
        cdef size_t address
        while stack:
            address, prefix = stack.pop()
            node = <Node*>address
            if node.terminal:
                yield prefix
                # The nodes on the stack may be gone if the trie changed.
                if self._version != version:
                    raise RuntimeError("PrefixTrie changed during iteration")
            for i in range(node.nchildren - 1, -1, -1):
                child = _entries(node)[i].child
                stack.append((<size_t>child, prefix + PyUnicode_FromKindAndData(child.kind, _label(child), child.length)))

    cdef Node* _find(self, str key):
        cdef int kind = PyUnicode_KIND(key)
        cdef const char* data = <const char*>PyUnicode_DATA(key)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(key)
        cdef Py_ssize_t pos = 0, index
        cdef Node* node = self._root
        cdef Node* child
        while pos < n:
            index = _find(node, _read(kind, data, pos))
            if index < 0:
                return NULL
            child = _entries(node)[index].child
            if child.length > n - pos or not _equal(child.kind, _label(child), kind, data + pos * kind, child.length):
                return NULL
            pos += child.length
            node = child
        return node if node.terminal else NULL

    cdef Node* _walk_common(self, str query, Py_ssize_t* length):
        # Returns the node whose subtree holds exactly the stored keys that
        # share the longest prefix with `query`; that length goes to *length.
        cdef int kind = PyUnicode_KIND(query)
        cdef const char* data = <const char*>PyUnicode_DATA(query)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(query)
        cdef Py_ssize_t pos = 0, index, common
        cdef Node* node = self._root
        cdef Node* child
        while pos < n:
            index = _find(node, _read(kind, data, pos))
            if index < 0:
                break
            child = _entries(node)[index].child
            common = _common(child.kind, _label(child), kind, data + pos * kind, min(child.length, n - pos))
            if common < child.length:
                length[0] = pos + common
                return child
            pos += child.length
            node = child
        length[0] = pos
        return node
