"""Positions, trivia and command splitting on source text."""

from __future__ import annotations

import subprocess
import sys

import pytest

from extract_fixtures import example_sources
from leanrpc.extract import extract_declarations, slice_source
from leanrpc.extract._commands import describe_command, split_commands
from leanrpc.extract._source import SourceText
from leanrpc.results import Position


def test_slice_source_counts_code_points():
    source = "theorem t₁ : 1 = 1 := by\n  rfl -- ✓\n"
    assert slice_source(source, Position(1, 8), Position(1, 10)) == "t₁"
    assert slice_source(source, Position(2, 2), Position(2, 5)) == "rfl"
    assert slice_source(source, Position(1, 22), Position(2, 5)) == "by\n  rfl"
    assert slice_source(source, Position(3, 0), Position(3, 0)) == ""


@pytest.mark.parametrize(
    "start,end",
    [
        (Position(0, 0), Position(1, 0)),
        (Position(1, 99), Position(2, 0)),
        (Position(2, 3), Position(2, 1)),
        (Position(1, 0), Position(9, 0)),
    ],
)
def test_slice_source_rejects_bad_positions(start, end):
    with pytest.raises(ValueError):
        slice_source("ab\ncd", start, end)


def test_trim_skips_comments_but_not_strings():
    source = 'simp [foo] -- note\n  /- a /- nested -/ block -/\n  exact "-- not a comment"  \n'
    text = SourceText(source)
    start, end = text.trim(0, len(source))
    assert source[start:end] == source[: source.index('comment"') + len('comment"')]
    assert text.trim_end(0, source.index("\n  exact")) == len("simp [foo]")


def test_char_literals_and_primes():
    source = "have h' : c = '\"' := by simp -- x\n"
    text = SourceText(source)
    assert not text.in_string(source.index("h'") + 1)
    assert text.in_string(source.index("'\"'") + 1)
    assert text.in_comment(source.index("-- x"))
    assert not text.in_comment(source.index("simp"))


SPLIT_SRC = """import Mathlib
open Real

/-- A doc comment,
theorem not_a_command : x
-/
@[simp]
private theorem Foo.bar (x : Nat) : x = x := by
  rfl
-- a comment at column 0 does not end the command
theorem «weird name» : True :=
trivial

example : True := by trivial
instance : Inhabited Nat := ⟨0⟩
instance (priority := 10) instFoo : Inhabited Nat := ⟨0⟩
set_option maxHeartbeats 400 in
lemma with_option : True := trivial
#eval 1
noncomputable def f : Nat := 0
"""


def test_split_commands_and_names():
    text = SourceText(SPLIT_SRC)
    spans = split_commands(text)
    got = [(s.keyword, s.name, SPLIT_SRC[s.start : s.end].split("\n")[0]) for s in spans]
    assert got == [
        ("", "", "import Mathlib"),
        ("", "", "open Real"),
        ("theorem", "Foo.bar", "/-- A doc comment,"),
        ("theorem", "«weird name»", "theorem «weird name» : True :="),
        ("example", "", "example : True := by trivial"),
        ("instance", "", "instance : Inhabited Nat := ⟨0⟩"),
        ("instance", "instFoo", "instance (priority := 10) instFoo : Inhabited Nat := ⟨0⟩"),
        ("lemma", "with_option", "set_option maxHeartbeats 400 in"),
        ("", "", "#eval 1"),
        ("def", "f", "noncomputable def f : Nat := 0"),
    ]
    # Trailing comments are not part of a command.
    foo = spans[2]
    assert SPLIT_SRC[foo.start : foo.end].endswith("  rfl")
    assert SPLIT_SRC[spans[3].start : spans[3].end].endswith("\ntrivial")


def test_describe_command_edge_cases():
    for source, expected in [
        ("theorem foo{x : Nat} : x = x := rfl", ("theorem", "foo")),
        ("def f' (n : Nat) := n", ("def", "f'")),
        ("class inductive Foo", ("inductive", "Foo")),
        ("structure Point where", ("structure", "Point")),
        ("abbrev N := Nat", ("abbrev", "N")),
        ("instance [Foo] : Bar", ("instance", "")),
        ("namespace X", ("", "")),
        ("", ("", "")),
    ]:
        text = SourceText(source)
        assert describe_command(text, 0, len(source)) == expected, source


KIMINA_SOURCES = [(n, s) for n, s in example_sources() if n.startswith(("demo_", "goedel-"))]


@pytest.mark.parametrize("name,source", KIMINA_SOURCES, ids=[n for n, _ in KIMINA_SOURCES])
def test_real_sources_split_into_one_theorem(name, source):
    # Each Kimina example / Goedel proof is a header, then one theorem.
    text = SourceText(source)
    spans = split_commands(text)
    decls = [s for s in spans if s.keyword]
    assert len(decls) == 1, [source[s.start : s.end][:40] for s in decls]
    assert decls[0].keyword == "theorem" and decls[0].name.startswith("lean_workbook")
    assert decls[0] is spans[-1]
    # Only whitespace and comments follow it.
    rest = range(decls[0].end, len(source))
    assert all(text.is_trivia(i) for i in rest)


def test_no_infotree_gives_declarations_without_steps():
    source = "def a : Nat := 37\ntheorem h1 : a = a := rfl\n"
    decls = extract_declarations([], source)
    assert [(d.name, d.steps) for d in decls] == [("a", []), ("h1", [])]
    assert extract_declarations(None, source) == decls


def test_extract_imports_neither_grpc_nor_asyncio():
    code = (
        "import sys, leanrpc.extract\n"
        "print(sorted(m for m in ('grpc', 'asyncio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
