"""A header split reused across snippets that share their head (core/header_memo.py,
issue 38 item 6) is exactly the split `split_header` gives.

`decided_by` says how many leading characters decided a split (and, where a doc
comment follows the preamble, where it opens: it must close). The claim under
test: every text that starts with those characters, is longer, and closes that
doc comment, splits into the same header and preamble with its own body. Checked on the 805 real proofs
(each cut after its deciding characters and given other proofs' bodies), on
fuzzed header soups cut the same way and given fuzzed tails that start with
name characters, dots, header and preamble words, and on both builds (the
compiled splitter and its pure twin, which share one source).
"""

from __future__ import annotations

import random

import pytest

import testkit
from leanrpc._native import headers as native
from leanrpc.core import headers_py
from leanrpc.core.header_memo import HeaderMemo
from leanrpc.core.headers import split_header

BUILDS = [pytest.param(native, id="compiled"), pytest.param(headers_py, id="python")]

# Pieces of heads (header, preamble, what lies between) and of what follows them.
HEAD = [
    "import Mathlib",
    "import Aesop",
    "import Mathlib.Tactic",
    "import «My Lib»",
    "public import A",
    "meta import B",
    "import all C",
    "module",
    "prelude",
    "import",
    "set_option maxHeartbeats 400000",
    "set_option pp.all true",
    'set_option s "a -- b"',
    "open Real Nat Topology",
    "open Nat hiding add_comm",
    "open Real in",
    "open Real\n  Nat",
    "open scoped BigOperators",
]
BETWEEN = [
    "\n",
    "\n\n",
    " ",
    "\t",
    "\r\n",
    "-- a comment\n",
    "/- c /- nested -/ -/",
    "/-! a module doc -/\n",
]
FIRST = [
    "/-- a doc -/",
    "/-- a doc with /- nested -/ text -/",
    "/--",
    "theorem",
    "lemma",
    "example",
    "def",
    "noncomputable",
    "namespace",
    "section",
    "axiom",
    "class",
    "public",
    "meta",
    "import",
    "open",
    "set_option",
    "@[simp]",
    "#eval",
    '"str',
    "/- open",
]
TAIL = [
    "x",
    ".",
    ".x",
    "'",
    "!",
    "₁",
    "«q»",
    " t : 1 = 1 := rfl",
    "\n",
    " ",
    "theorem t : True := trivial",
    "import Aesop",
    "open Real",
    "set_option x 1",
    "-/",
    "/-",
    '"',
    "in",
    "section",
    "/-- d -/",
    " a doc -/",
    " a /- nested -/ doc -/\ntheorem t : True := trivial",
]


def _soup(rng: random.Random) -> str:
    parts = ["\ufeff"] if rng.random() < 0.05 else []
    for _ in range(rng.randint(0, 6)):
        parts.append(rng.choice(HEAD))
        parts.append(rng.choice(BETWEEN))
    parts.append(rng.choice(FIRST[:12] if rng.random() < 0.6 else FIRST))
    parts.append(rng.choice([" ", "\n", " ", "\n", "", "x", "."]))
    parts.extend(rng.choice(TAIL) for _ in range(rng.randint(0, 3)))
    return "".join(parts)


def _tail(rng: random.Random) -> str:
    return "".join(rng.choice(TAIL + BETWEEN + HEAD) for _ in range(rng.randint(1, 4)))


def _holds(build, decided: tuple, other: str) -> bool:
    """`decided_by`'s conditions on `other`, as core/header_memo.py checks them."""
    return decided[1] < 0 or build.doc_closes(other, decided[1])


def _reused(build, code: str, cut: int, other: str):
    """The split `other` gets from `code`'s, when `other` starts with code[:cut]."""
    split = build.split_header(code)
    start = len(code) - len(split.body)
    return build.HeaderSplit(
        split.imports,
        split.import_key,
        split.modules,
        split.preamble,
        split.preamble_key,
        other[start:],
        split.body_start_line,
        split.body_start_column,
    )


@pytest.mark.parametrize("build", BUILDS)
def test_fuzzed_heads_cut_after_their_deciding_characters_split_the_same(build):
    rng = random.Random(38)
    decided = checked = unclosed = 0
    for _ in range(8000):
        code = _soup(rng)
        found = build.decided_by(code, build.split_header(code))
        cut = found[0]
        if not cut:
            assert found == (0, -1)
            continue
        decided += 1
        assert 0 < cut <= len(code)
        for _ in range(4):
            other = code[:cut] + _tail(rng)
            if not _holds(build, found, other):
                unclosed += 1
                continue
            assert build.split_header(other) == _reused(build, code, cut, other), (code, other)
            checked += 1
    # The fuzzer reaches every outcome: heads decided or not, docs closed or not.
    assert decided > 1000 and checked > 2000 and unclosed > 100
    assert decided < 7000


@pytest.mark.parametrize("build", BUILDS)
def test_every_real_proof_with_another_body_splits_as_its_own_head_says(build):
    proofs = [text for _name, text in testkit.real_proofs()]
    rng = random.Random(805)
    decided = 0
    for code in proofs:
        found = build.decided_by(code, build.split_header(code))
        cut = found[0]
        if not cut:
            continue
        decided += 1
        other = code[:cut] + rng.choice(proofs)
        if not _holds(build, found, other):
            other += " -/"
        assert _holds(build, found, other)
        assert build.split_header(other) == _reused(build, code, cut, other)
    assert decided > 700  # nearly all: a doc comment or `theorem` follows their preambles


def test_the_deciding_characters_stop_short_of_a_word_the_splitter_reads_ahead():
    for head in ("import A\npublic section\n", "import A\nopen B in\n", "import A\n/-- open"):
        code = head + "theorem t : True := trivial\n"
        assert headers_py.decided_by(code, headers_py.split_header(code)) == (0, -1)
    code = "import A\nopen B\n\ntheorem t : True := trivial\n"
    cut, doc = headers_py.decided_by(code, headers_py.split_header(code))
    assert doc == -1
    assert code[:cut] == "import A\nopen B\n\ntheorem "
    # One character fewer would be wrong: `theoremx` is a name, and the `open`
    # line is then no complete preamble command.
    glued = code[: cut - 1] + "x : True := trivial\n"
    assert headers_py.split_header(glued).preamble_key == ""


def test_a_doc_comment_decides_by_its_opening_and_its_closing():
    code = "import A\nopen B\n\n/-- Show it. -/\ntheorem t : True := trivial\n"
    cut, doc = headers_py.decided_by(code, headers_py.split_header(code))
    assert code[:cut] == "import A\nopen B\n\n/-- " and code[doc:].startswith("/--")
    # Another problem under the same head: the same split, its own body.
    other = code[:cut] + "Sum them. -/\ntheorem u : 1 = 1 := rfl\n"
    assert headers_py.split_header(other).preamble_key == "open B"
    # An unterminated doc comment is read to the end: the `open` line is then
    # no complete preamble command, and the memo does not reuse the split.
    unclosed = code[:cut] + "Sum them.\ntheorem u : 1 = 1 := rfl\n"
    assert not headers_py.doc_closes(unclosed, doc)
    assert headers_py.split_header(unclosed).preamble_key == ""
    memo = HeaderMemo()
    memo.split(code)
    assert memo.split(unclosed) == split_header(unclosed) and memo.reused == 0
    assert memo.split(other) == split_header(other) and memo.reused == 1


def test_a_group_of_completions_is_split_once_and_each_keeps_its_own_body():
    head = (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
        "open BigOperators Real Nat Topology Rat\n\n/-- Show that 1 + 1 = 2. -/\n"
        "theorem one_add_one : (1 : ℕ) + 1 = 2 := by\n"
    )
    completions = [head + f"  norm_num  -- try {k}\n" for k in range(16)]
    memo = HeaderMemo()
    splits = [memo.split(code) for code in completions]
    assert memo.reused == 15
    assert splits == [split_header(code) for code in completions]
    assert len({split.body for split in splits}) == 16
    # Another problem under the same head reuses it too (the doc comment decides
    # by its opening and its closing); another head is split afresh and kept.
    other = completions[0].replace("1 + 1 = 2", "2 + 2 = 4").replace("one_add", "two_add")
    assert memo.split(other) == split_header(other) and memo.reused == 16
    changed = completions[0].replace("open BigOperators", "open Finset")
    assert memo.split(changed) == split_header(changed) and memo.reused == 16
    assert memo.split(changed + " ") == split_header(changed + " ") and memo.reused == 17


def test_a_text_no_longer_than_the_deciding_characters_is_split_afresh():
    code = "import A\n\ntheorem t : True := trivial\n"
    memo = HeaderMemo()
    memo.split(code)
    cut, _doc = headers_py.decided_by(code, headers_py.split_header(code))
    short = code[:cut]
    assert memo.split(short) == split_header(short) and memo.reused == 0
