"""A compressed prefix trie over str keys, compiled (leanrpc._native.trie).

Same API and behaviour as the pure twin leanrpc.core.trie_py (read its
docstring); tests/native runs every test on both.

Layout: one C block per node (server/leanrpc/_native/trie_nodes.pxd); labels
keep the width (1, 2 or 4 bytes per code point, PEP 393) of the key they were
cut from, so Lean text, which is almost always 2 bytes wide, is compared with
memcmp; keys of mixed widths fall back to a typed loop (trie_text.pxd).

Payloads live in a Python list (`_payloads`) that nodes index, so the
garbage collector sees them and cycles through a payload are collected.

Owns: PrefixTrie, its walks (insert, remove, the lookups, keys) and its
payload slots and insertion clock. Blocks are made, linked, split, merged and
freed by leanrpc._native.trie_nodes.
May cimport: leanrpc._native.trie_nodes, leanrpc._native.trie_text, cpython.mem.
"""

from cpython.mem cimport PyMem_Free, PyMem_Realloc

from leanrpc._native.trie_nodes cimport (
    Entry,
    Node,
    add_child,
    find_child,
    first_code_point,
    free_tree,
    label_common,
    label_starts,
    merge_with_only_child,
    new_node,
    node_entries,
    node_label,
    recompute_best,
    remove_child_at,
    split_child,
)
from leanrpc._native.trie_text cimport (
    PyUnicode_DATA,
    PyUnicode_FromKindAndData,
    PyUnicode_GET_LENGTH,
    PyUnicode_KIND,
    ucs_read,
)

__all__ = ["PrefixTrie"]


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
        self._root = new_node(1, NULL, 0, 0)
        self._size = 0
        self._clock = 0
        self._version = 0
        self._payloads = []
        self._free_slots = []
        self._path = NULL
        self._links = NULL
        self._path_capacity = 0

    def __dealloc__(self):
        free_tree(self._root)
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
        cdef Node* fresh = new_node(1, NULL, 0, 0)
        free_tree(self._root)
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
            index = find_child(node, ucs_read(kind, data, pos))
            if index < 0:
                leaf = new_node(kind, data + pos * kind, n - pos, 0)
                try:
                    slot = self._take_slot(payload)
                    node = add_child(node, leaf)
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
            entry = &node_entries(node)[index]
            child = entry.child
            common = label_common(child, kind, data + pos * kind, n - pos)
            if common < child.length:
                # `child` keeps label[:common]; the rest of its label moves to a new only child.
                child = split_child(&entry.child, common)
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
            index = find_child(node, ucs_read(kind, data, pos))
            if index < 0:
                return False
            child = node_entries(node)[index].child
            if not label_starts(child, kind, data + pos * kind, n - pos):
                return False
            pos += child.length
            link = &node_entries(node)[index].child
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
                remove_child_at(parent, find_child(parent, first_code_point(node)))
                PyMem_Free(node)
                depth -= 1
                if depth > 1 and not parent.terminal and parent.nchildren == 1:
                    parent = merge_with_only_child(parent)
                    self._links[depth - 1][0] = parent
                    self._path[depth - 1] = parent
            elif node.nchildren == 1:
                node = merge_with_only_child(node)
                self._links[depth - 1][0] = node
                self._path[depth - 1] = node
        for i in range(depth - 1, -1, -1):
            recompute_best(self._path[i])
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
            index = find_child(node, ucs_read(kind, data, pos))
            if index < 0:
                break
            child = node_entries(node)[index].child
            if not label_starts(child, kind, data + pos * kind, n - pos):
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
        self._walkucs_common(query, &length)
        return length

    def common_prefix(self, str query not None):
        """(common_prefix_length(query), payload of the newest key sharing that prefix).

        None when the trie is empty.
        """
        cdef Py_ssize_t length = 0
        cdef Node* node = self._walkucs_common(query, &length)
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
        cdef str prefix, label
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
                child = node_entries(node)[i].child
                label = PyUnicode_FromKindAndData(child.kind, node_label(child), child.length)
                stack.append((<size_t>child, prefix + label))

    cdef Node* _find(self, str key):
        cdef int kind = PyUnicode_KIND(key)
        cdef const char* data = <const char*>PyUnicode_DATA(key)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(key)
        cdef Py_ssize_t pos = 0, index
        cdef Node* node = self._root
        cdef Node* child
        while pos < n:
            index = find_child(node, ucs_read(kind, data, pos))
            if index < 0:
                return NULL
            child = node_entries(node)[index].child
            if not label_starts(child, kind, data + pos * kind, n - pos):
                return NULL
            pos += child.length
            node = child
        return node if node.terminal else NULL

    cdef Node* _walkucs_common(self, str query, Py_ssize_t* length):
        # Returns the node whose subtree holds exactly the stored keys that
        # share the longest prefix with `query`; that length goes to *length.
        cdef int kind = PyUnicode_KIND(query)
        cdef const char* data = <const char*>PyUnicode_DATA(query)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(query)
        cdef Py_ssize_t pos = 0, index, common
        cdef Node* node = self._root
        cdef Node* child
        while pos < n:
            index = find_child(node, ucs_read(kind, data, pos))
            if index < 0:
                break
            child = node_entries(node)[index].child
            common = label_common(child, kind, data + pos * kind, n - pos)
            if common < child.length:
                length[0] = pos + common
                return child
            pos += child.length
            node = child
        length[0] = pos
        return node
