"""PrefixTrie on both implementations, checked against a brute-force model."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from native_support import both

pytestmark = pytest.mark.timeout(120)


class Model:
    """The obvious, slow reference: a dict and linear scans."""

    def __init__(self):
        self.items = {}  # key -> (stamp, payload)
        self.clock = 0

    def insert(self, key, payload):
        self.clock += 1
        self.items[key] = (self.clock, payload)

    def remove(self, key):
        return self.items.pop(key, None) is not None

    def longest_prefix(self, query):
        hits = [key for key in self.items if query.startswith(key)]
        if not hits:
            return None
        key = max(hits, key=len)
        return len(key), self.items[key][1]

    def common_prefix_length(self, query):
        return max((lcp(key, query) for key in self.items), default=0)

    def common_prefix(self, query):
        if not self.items:
            return None
        length = self.common_prefix_length(query)
        stamp, payload = max(
            value for key, value in self.items.items() if lcp(key, query) == length
        )
        return length, payload


def lcp(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            return n
        n += 1
    return n


def check(trie, model, queries):
    assert len(trie) == len(model.items)
    assert list(trie.keys()) == sorted(model.items)
    assert list(trie) == sorted(model.items)
    for key, (_, payload) in model.items.items():
        assert key in trie
        assert trie.get(key, "missing") is payload
    for query in queries:
        assert (query in trie) == (query in model.items)
        assert trie.longest_prefix(query) == model.longest_prefix(query), query
        assert trie.common_prefix_length(query) == model.common_prefix_length(query), query
        assert trie.common_prefix(query) == model.common_prefix(query), query


# Characters of every PEP 393 width, so edges and queries mix 1-, 2- and
# 4-byte strings: "é" is Latin-1, "⊢" needs 2 bytes, "𝓝" needs 4.
_alphabet = st.sampled_from(["a", "b", " ", "\n", "é", "⊢", "𝓝"])
_keys = st.lists(_alphabet, max_size=8).map("".join)
_ops = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "remove", "clear_rarely"]), _keys, st.integers(0, 5)
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(ops=_ops, queries=st.lists(_keys, max_size=10))
def test_against_model(ops, queries):
    for module in both("trie"):
        trie = module.PrefixTrie()
        model = Model()
        for op, key, payload in ops:
            if op == "insert":
                trie.insert(key, payload)
                model.insert(key, payload)
            elif op == "remove":
                assert trie.remove(key) == model.remove(key)
            elif payload == 5:  # clear_rarely
                trie.clear()
                model = _cleared(model)
        check(trie, model, queries + [key for _, key, _ in ops])


def _cleared(model):
    fresh = Model()
    fresh.clock = model.clock
    return fresh


@settings(max_examples=100, deadline=None)
@given(ops=_ops, queries=st.lists(_keys, max_size=10))
def test_implementations_agree(ops, queries):
    results = []
    for module in both("trie"):
        trie = module.PrefixTrie()
        log = []
        for op, key, payload in ops:
            if op == "insert":
                trie.insert(key, payload)
            elif op == "remove":
                log.append(trie.remove(key))
        for query in queries:
            log.append(
                (
                    trie.longest_prefix(query),
                    trie.common_prefix_length(query),
                    trie.common_prefix(query),
                )
            )
        log.append(list(trie.keys()))
        results.append(log)
    assert results[0] == results[1]


def test_empty(trie):
    t = trie.PrefixTrie()
    assert len(t) == 0
    assert list(t.keys()) == []
    assert t.longest_prefix("abc") is None
    assert t.common_prefix_length("abc") == 0
    assert t.common_prefix("abc") is None
    assert t.common_prefix("") is None
    assert t.get("abc") is None
    assert t.get("abc", 7) == 7
    assert "abc" not in t
    assert not t.remove("abc")
    assert repr(t) == "<PrefixTrie with 0 keys>"


def test_empty_key(trie):
    t = trie.PrefixTrie()
    t.insert("", "root")
    assert "" in t and len(t) == 1
    assert t.longest_prefix("anything") == (0, "root")
    assert t.common_prefix("x") == (0, "root")
    t.insert("ab", "ab")
    assert t.longest_prefix("abc") == (2, "ab")
    assert t.longest_prefix("ax") == (0, "root")
    assert t.remove("")
    assert t.longest_prefix("ax") is None
    assert list(t.keys()) == ["ab"]


def test_payload_replacement_makes_key_newest(trie):
    t = trie.PrefixTrie()
    t.insert("theorem a", 1)
    t.insert("theorem b", 2)
    assert t.common_prefix("theorem c") == (8, 2)
    t.insert("theorem a", 3)
    assert len(t) == 2
    assert t.get("theorem a") == 3
    assert t.common_prefix("theorem c") == (8, 3)
    assert t.remove("theorem a")
    assert t.common_prefix("theorem c") == (8, 2)
    assert t.common_prefix("theorem a") == (8, 2)


def test_payloads_are_kept_by_identity(trie):
    t = trie.PrefixTrie()
    payload = object()
    t.insert("k", payload)
    assert t.get("k") is payload
    assert t.longest_prefix("k!")[1] is payload
    assert t.common_prefix("q")[1] is payload


def test_long_shared_prefixes(trie):
    rng = random.Random(3)
    header = "import Mathlib\nopen Real\n\ntheorem foo (x : ℝ) (h : 0 < x) : x ^ 2 > 0 := by\n" * 20
    keys = [header]
    for i in range(150):
        base = rng.choice(keys)
        cut = rng.randint(len(header), len(base))
        keys.append(base[:cut] + f"  nlinarith [sq_nonneg (x - {i})]\n" * rng.randint(1, 4))
    t = trie.PrefixTrie()
    model = Model()
    for i, key in enumerate(keys):
        t.insert(key, i)
        model.insert(key, i)
    queries = [key + "  exact h\n" for key in keys[:30]] + [
        key[: len(key) - 3] for key in keys[:30]
    ]
    queries += [header[:1000] + "𝓝" + header[1000:]]  # a 4-byte query against 2-byte edges
    check(t, model, queries)
    for key in keys[::2]:
        assert t.remove(key) == model.remove(key)
    check(t, model, queries)


def test_mixed_string_widths(trie):
    t = trie.PrefixTrie()
    t.insert("abc", 1)  # 1 byte per character
    t.insert("abc⊢d", 2)  # 2
    t.insert("ab𝓝", 3)  # 4
    assert t.longest_prefix("abc⊢d𝓝") == (5, 2)
    assert t.longest_prefix("abcé") == (3, 1)
    assert t.common_prefix_length("ab𝓝𝓝") == 3
    assert t.common_prefix_length("abc⊢x") == 4
    assert t.common_prefix("abé") == (2, 3)
    assert "abc⊢d" in t and "abc⊢" not in t
    assert list(t.keys()) == ["abc", "abc⊢d", "ab𝓝"]


def test_remove_everything_then_reuse(trie):
    t = trie.PrefixTrie()
    keys = [f"cmd {i:05d} " + "x" * (i % 17) for i in range(2000)]
    for key in keys:
        t.insert(key, key)
    random.Random(1).shuffle(keys)
    for key in keys:
        assert t.remove(key)
        assert not t.remove(key)
    assert len(t) == 0 and list(t.keys()) == []
    assert t.common_prefix("cmd 00001") is None
    assert t.common_prefix_length("cmd 00001") == 0
    t.insert("cmd", 1)
    assert t.common_prefix("cmd 00001") == (3, 1)


def test_clear(trie):
    t = trie.PrefixTrie()
    for i in range(100):
        t.insert(str(i), i)
    t.clear()
    assert len(t) == 0 and t.common_prefix("1") is None
    t.insert("1", "one")
    assert t.longest_prefix("12") == (1, "one")


def test_keys_detects_changes(trie):
    t = trie.PrefixTrie()
    for key in ("a", "b", "c"):
        t.insert(key)
    keys = t.keys()
    assert next(keys) == "a"
    t.insert("d")
    with pytest.raises(RuntimeError):
        next(keys)
    keys = iter(t)
    next(keys)
    t.insert("a", "same key, new payload")  # not a change of the key set
    assert list(keys) == ["b", "c", "d"]


def test_types(trie):
    t = trie.PrefixTrie()
    for call in (t.insert, t.remove, t.longest_prefix, t.common_prefix_length, t.common_prefix):
        with pytest.raises(TypeError):
            call(b"bytes")
        with pytest.raises(TypeError):
            call(None)
    assert t.get(1, "d") == "d"
    assert 1 not in t
    assert None not in t


def test_many_long_keys_quickly(trie):
    # 20k keys of ~1.5k characters: catches accidental quadratic behaviour.
    rng = random.Random(5)
    stems = [
        "theorem t%d (a b : ℕ) : a + b = b + a := by\n" % i + "  skip\n" * rng.randint(100, 200)
        for i in range(200)
    ]
    t = trie.PrefixTrie()
    for i in range(20_000):
        t.insert(rng.choice(stems) + f"  omega -- {i}\n", i)
    assert len(t) == 20_000
    for i in range(2000):
        query = rng.choice(stems) + "  omega -- 1"
        assert t.common_prefix_length(query) >= len(query) - 1


def test_wide_nodes(trie):
    # Hundreds of children under one node (the native side binary-searches
    # past eight), inserted and removed in random order.
    rng = random.Random(11)
    firsts = (
        [chr(c) for c in range(0x20, 0x20 + 150)]
        + [chr(c) for c in range(0x2200, 0x2200 + 100)]
        + ["𝓝", "𝔽"]
    )
    keys = [
        prefix + first + tail
        for prefix in ("", "by ")
        for first in firsts
        for tail in ("", "x", "xy")
    ]
    rng.shuffle(keys)
    t = trie.PrefixTrie()
    model = Model()
    for i, key in enumerate(keys):
        t.insert(key, i)
        model.insert(key, i)
    queries = [key + "z" for key in keys[:200]] + [key[:-1] + "q" for key in keys[:200] if key]
    check(t, model, queries)
    for key in keys[::3]:
        assert t.remove(key) == model.remove(key)
    check(t, model, queries)


def test_payload_cycles_are_collected(trie):
    import gc
    import weakref

    class Payload:
        pass

    t = trie.PrefixTrie()
    payload = Payload()
    payload.trie = t  # trie -> payload -> trie
    t.insert("key", payload)
    ref = weakref.ref(payload)
    del t, payload
    gc.collect()
    assert ref() is None
