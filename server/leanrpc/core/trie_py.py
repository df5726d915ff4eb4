"""A compressed prefix trie (radix tree) over str keys: the pure-Python twin.

`leanrpc._native.trie` (native/trie.pyx) implements the same API and
behaviour; tests/native runs every test against both. Keep them in step.

The keys are Lean command texts: thousands of characters, sharing long
prefixes (a header, a theorem statement, the first tactics). Edges hold whole
substrings, so memory follows the amount of *distinct* text, and a lookup
does one dict probe and one substring comparison per branching point.

Every node also remembers the newest insertion in its subtree, so
`common_prefix` can name the most recently inserted key that shares the
longest prefix with a query without visiting the subtree.
"""

from collections.abc import Iterator

__all__ = ["PrefixTrie"]


class _Node:
    __slots__ = ("label", "children", "terminal", "payload", "stamp", "best_stamp", "best_payload")

    def __init__(self, label: str) -> None:
        self.label = label  # the edge text from the parent ("" for the root)
        self.children: dict[str, _Node] = {}  # keyed by the first character of the child's label
        self.terminal = False  # a stored key ends here
        self.payload: object = None
        self.stamp = -1  # insertion clock of the key ending here
        self.best_stamp = -1  # newest insertion clock in this subtree, -1 if empty
        self.best_payload: object = None  # its payload

    def recompute_best(self) -> None:
        stamp = self.stamp if self.terminal else -1
        payload = self.payload
        for child in self.children.values():
            if child.best_stamp > stamp:
                stamp = child.best_stamp
                payload = child.best_payload
        self.best_stamp = stamp
        self.best_payload = payload

    def absorb_only_child(self) -> None:
        # Path compression: a non-terminal node with one child becomes that child.
        (child,) = self.children.values()
        self.label += child.label
        self.children = child.children
        self.terminal = child.terminal
        self.payload = child.payload
        self.stamp = child.stamp
        self.best_stamp = child.best_stamp
        self.best_payload = child.best_payload


def _common_length(a: str, apos: int, b: str, bpos: int, n: int) -> int:
    """The number of equal characters of a[apos:apos+n] and b[bpos:bpos+n]."""
    if b.startswith(a[apos : apos + n], bpos):
        return n
    lo, hi = 0, n - 1  # lo chars are known equal; hi is an upper bound
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if b.startswith(a[apos : apos + mid], bpos):
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixTrie:
    """A set of str keys with payloads, answering prefix questions.

    `insert` replaces the payload of an existing key (and makes it the most
    recently inserted). `keys()` yields keys in code-point order.
    """

    __slots__ = ("_root", "_size", "_clock", "_version")

    def __init__(self) -> None:
        self._root = _Node("")
        self._size = 0
        self._clock = 0
        self._version = 0  # bumped on every change of the key set, for keys()

    def __len__(self) -> int:
        return self._size

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) is not None

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __repr__(self) -> str:
        return f"<PrefixTrie with {self._size} keys>"

    def clear(self) -> None:
        self._root = _Node("")
        self._size = 0
        self._version += 1

    def insert(self, key: str, payload: object = None) -> None:
        _check_str(key)
        self._clock += 1
        stamp = self._clock
        node = self._root
        pos = 0
        n = len(key)
        while True:
            node.best_stamp = stamp
            node.best_payload = payload
            if pos == n:
                if not node.terminal:
                    node.terminal = True
                    self._size += 1
                    self._version += 1
                node.payload = payload
                node.stamp = stamp
                return
            first = key[pos]
            child = node.children.get(first)
            if child is None:
                leaf = _Node(key[pos:])
                leaf.terminal = True
                leaf.payload = leaf.best_payload = payload
                leaf.stamp = leaf.best_stamp = stamp
                node.children[first] = leaf
                self._size += 1
                self._version += 1
                return
            label = child.label
            length = len(label)
            if key.startswith(label, pos):
                node = child
                pos += length
                continue
            common = _common_length(label, 0, key, pos, min(length, n - pos))
            middle = _Node(label[:common])
            child.label = label[common:]
            middle.children[child.label[0]] = child
            node.children[first] = middle
            node = middle
            pos += common

    def remove(self, key: str) -> bool:
        """Removes `key`; returns whether it was stored."""
        _check_str(key)
        path = [self._root]
        node = self._root
        pos = 0
        n = len(key)
        while pos < n:
            child = node.children.get(key[pos])
            if child is None or not key.startswith(child.label, pos):
                return False
            pos += len(child.label)
            node = child
            path.append(node)
        if not node.terminal:
            return False
        node.terminal = False
        node.payload = None
        node.stamp = -1
        self._size -= 1
        self._version += 1
        if len(path) > 1:
            if not node.children:
                parent = path[-2]
                del parent.children[node.label[0]]
                path.pop()
                if len(path) > 1 and not parent.terminal and len(parent.children) == 1:
                    parent.absorb_only_child()
            elif len(node.children) == 1:
                node.absorb_only_child()
        for step in reversed(path):
            step.recompute_best()
        return True

    def get(self, key: str, default: object = None) -> object:
        if not isinstance(key, str):
            return default
        node = self._find(key)
        return default if node is None else node.payload

    def longest_prefix(self, query: str) -> tuple[int, object] | None:
        """The longest stored key that is a prefix of `query`: (its length, payload)."""
        _check_str(query)
        node = self._root
        found = (0, node.payload) if node.terminal else None
        pos = 0
        n = len(query)
        while pos < n:
            child = node.children.get(query[pos])
            if child is None or not query.startswith(child.label, pos):
                break
            pos += len(child.label)
            node = child
            if node.terminal:
                found = (pos, node.payload)
        return found

    def common_prefix_length(self, query: str) -> int:
        """The length of the longest common prefix of `query` and any stored key."""
        _check_str(query)
        return self._walk_common(query)[0]

    def common_prefix(self, query: str) -> tuple[int, object] | None:
        """(common_prefix_length(query), payload of the newest key sharing that prefix).

        None when the trie is empty.
        """
        _check_str(query)
        length, node = self._walk_common(query)
        if node.best_stamp < 0:
            return None
        return length, node.best_payload

    def keys(self) -> Iterator[str]:
        """Yields the stored keys in code-point order.

        Raises RuntimeError if the trie's keys change during iteration.
        """
        version = self._version
        stack = [(self._root, "")]
        while stack:
            node, prefix = stack.pop()
            if node.terminal:
                yield prefix
                if self._version != version:
                    raise RuntimeError("PrefixTrie changed during iteration")
            children = node.children
            for first in sorted(children, reverse=True):
                child = children[first]
                stack.append((child, prefix + child.label))

    def _find(self, key: str) -> _Node | None:
        node = self._root
        pos = 0
        n = len(key)
        while pos < n:
            child = node.children.get(key[pos])
            if child is None or not key.startswith(child.label, pos):
                return None
            pos += len(child.label)
            node = child
        return node if node.terminal else None

    def _walk_common(self, query: str) -> tuple[int, _Node]:
        # Returns the common length and the node whose subtree holds exactly
        # the stored keys achieving it.
        node = self._root
        pos = 0
        n = len(query)
        while pos < n:
            child = node.children.get(query[pos])
            if child is None:
                break
            label = child.label
            if query.startswith(label, pos):
                pos += len(label)
                node = child
                continue
            return pos + _common_length(label, 0, query, pos, min(len(label), n - pos)), child
        return pos, node


def _check_str(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"PrefixTrie keys are str, got {type(key).__name__}")
