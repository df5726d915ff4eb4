"""The prefix index's per-worker history is bounded in characters as well as
in count (issue 44's leftover): a deep chain of long call texts, each repeating
the chain so far, keeps at most `history_mb` of text per worker (plus the
newest text), not the sum over the whole chain. No processes."""

from __future__ import annotations

from leanrpc.pool.prefix_index import PrefixIndex

TACTIC = "  skip -- " + "a" * 9_990 + "\n"  # 10,000 characters


def _chain(index: PrefixIndex, depth: int) -> list[str]:
    """Remembers a proof's call texts as a Prover chain makes them: each the
    command with every tactic so far."""
    texts = []
    text = "theorem t : True := by\n"
    for _ in range(depth):
        text += TACTIC
        index.remember("w1", "hdr", text)
        texts.append(text)
    return texts


def test_a_deep_chain_keeps_at_most_the_character_bound_per_worker():
    index = PrefixIndex(history_limit=64, history_mb=0.2)  # 200,000 characters
    texts = _chain(index, 40)  # 40 texts of up to 400,000 characters: 8.2 M in all
    held = index.history_chars_of("w1")
    # The newest text alone is over the bound: it is all that stays.
    assert held == len("hdr\x00") + len(texts[-1]) and index.history_size("w1") == 1
    assert sum(map(len, texts)) > 20 * held  # what the count bound alone would keep
    # The newest text is kept, so the chain's next step still reuses all of it.
    nxt = texts[-1] + TACTIC
    assert index.reusable_prefix("w1", "hdr", nxt) == len(texts[-1])
    # Evicted texts left the pool trie too: only what the history holds is routed to.
    assert len(index) == index.history_size("w1")


def test_without_a_character_bound_only_the_count_limits_the_history():
    index = PrefixIndex(history_limit=64, history_mb=0)
    texts = _chain(index, 40)
    assert index.history_size("w1") == 40
    assert index.history_chars_of("w1") == sum(len("hdr\x00") + len(t) for t in texts)


def test_texts_under_the_bound_stay_until_it_is_reached():
    index = PrefixIndex(history_limit=64, history_mb=0.2)
    texts = _chain(index, 12)  # 10,023 .. 120,023 characters
    held = index.history_chars_of("w1")
    assert held <= 200_000 < held + len(texts[-2])  # as many of the newest as fit
    assert index.history_size("w1") == 1 + (len(texts[-2]) + len(texts[-1]) <= 200_000 - 8)


def test_short_texts_are_limited_by_count_as_before():
    index = PrefixIndex(history_limit=3, history_mb=32)
    for i in range(5):
        index.remember("w1", "hdr", f"theorem t{i} : True := trivial\n")
    assert index.history_size("w1") == 3
    assert index.reusable_prefix("w1", "hdr", "theorem t0 : True := trivial\n") == 0
    index.forget_worker("w1")
    assert index.history_chars_of("w1") == 0 and len(index) == 0
