"""split_header on both implementations: every Lean text in shared/, targeted
cases, and generated snippets."""

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from native_support import both, dataset_statements, lean_corpus

pytestmark = pytest.mark.timeout(120)

FIELDS = (
    "imports",
    "import_key",
    "modules",
    "preamble",
    "preamble_key",
    "body",
    "body_start_line",
    "body_start_column",
)


def fields(split) -> tuple:
    return tuple(getattr(split, name) for name in FIELDS)


def header_lines(code: str, count: int) -> list[str]:
    """The first `count` lines as the splitter reads them (no CR, no BOM)."""
    lines = code.split("\n")[:count]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def body_offset(code: str, split) -> int:
    """Where the body starts in `code`, from its line and column."""
    lines = code.split("\n")
    k = split.body_start_line - 1
    if k >= len(lines):
        return len(code)
    bom = 1 if k == 0 and split.body_start_column and code.startswith("\ufeff") else 0
    return sum(len(line) + 1 for line in lines[:k]) + bom + split.body_start_column


def check_invariants(code: str, split) -> None:
    lines = code.split("\n")
    start = split.body_start_line
    k = start - 1
    assert 1 <= start <= len(lines) + 1
    assert split.body_start_column >= 0
    # The body is the user's text from its start on, character for character.
    assert split.body == code[body_offset(code, split) :]
    assert split.padded_body == "\n" * k + " " * split.body_start_column + split.body
    if split.body_start_column:
        # Only a header command ends mid-line; no preamble then.
        assert split.imports and not split.preamble_key
    # The preamble has one line per header line, at the same line numbers, and
    # each keeps only characters of that line, at their columns (comments and
    # imports become spaces or nothing).
    assert split.preamble.count("\n") == k
    assert split.preamble == "" or split.preamble.endswith("\n")
    originals = header_lines(code, k)
    kept = split.preamble.split("\n")[:k]
    for original, line in zip(originals, kept):
        assert len(line) <= len(original)
        assert all(mine == theirs or mine == " " for mine, theirs in zip(line, original)), (
            original,
            line,
        )
        assert line == "" or re.match(r"[ \t]*(open|set_option)\b", line), line
    commands = [line.strip() for line in kept if line.strip()]
    assert split.preamble_key == "\n".join(_collapse(command) for command in commands)
    # Header commands: module, prelude, then imports with their modifiers.
    header = split.imports.split("\n") if split.imports else []
    imports = [line for line in header if line not in ("module", "prelude")]
    assert header[: len(header) - len(imports)] in (
        [],
        ["module"],
        ["prelude"],
        ["module", "prelude"],
    )
    for line in imports:
        assert re.fullmatch(r"(public )?(meta )?import (all )?\S+", line), line
    words = [line.split()[-1] for line in imports]
    assert list(split.modules) == list(dict.fromkeys(words))
    assert split.import_key == "\n".join(dict.fromkeys(header))
    assert type(split.modules) is tuple
    # Every module appears, as written, in the header text.
    head = code[: body_offset(code, split)]
    for module in split.modules:
        assert module in head


def _collapse(command: str) -> str:
    # Whitespace runs become one space, except inside «names» and "strings".
    return re.sub(
        r'«[^»\n]*»|"(?:[^"\\\n]|\\.)*"|[ \t\r]+',
        lambda m: m.group() if m.group()[0] in '«"' else " ",
        command,
    )


# -- the shared corpus -----------------------------------------------------------


def test_corpus_invariants(headers):
    for label, code in lean_corpus():
        try:
            check_invariants(code, headers.split_header(code))
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from exc


def test_corpus_implementations_agree():
    python, native = both("headers")
    for label, code in lean_corpus():
        assert fields(python.split_header(code)) == fields(native.split_header(code)), label


def test_corpus_crlf_and_bom_agree_with_lf(headers):
    for label, code in lean_corpus()[::7]:
        plain = headers.split_header(code)
        crlf = headers.split_header("\ufeff" + code.replace("\n", "\r\n"))
        assert crlf.body_start_line == plain.body_start_line, label
        assert crlf.modules == plain.modules and crlf.import_key == plain.import_key
        assert crlf.preamble == plain.preamble and crlf.preamble_key == plain.preamble_key
        check_invariants("\ufeff" + code.replace("\n", "\r\n"), crlf)


_DECLARATION = re.compile(
    r"^(?:theorem|lemma|def|abbrev|example|structure|noncomputable|variable|/--|@\[|namespace|section)",
    re.M,
)


def test_dataset_statements_split_where_lean_would(headers):
    """Every statement row: the header's imports and commands land in the
    header parts, and the first declaration of the statement in the body."""
    rows = dataset_statements()
    assert len(rows) > 2000
    for row in rows:
        split = headers.split_header(row["code"])
        expected = re.findall(r"^import[ \t]+(\S+)", row["header"], re.M)
        assert list(split.modules) == list(dict.fromkeys(expected)), row["header"]
        declared = _DECLARATION.search(row["header"])
        for line in row["header"][: declared.start() if declared else None].split("\n"):
            if re.match(r"(open|set_option)\b", line) and not re.search(r"\bin\s*$", line):
                assert _collapse(line.strip()) in split.preamble_key.split("\n"), (
                    line,
                    row["header"],
                )
        declaration = _DECLARATION.search(row["statement"])
        if declaration is not None:
            assert row["statement"][declaration.start() :] in split.body
        if row["prefix"].startswith("/--"):
            assert row["prefix"] in split.body


# -- targeted cases --------------------------------------------------------------

CASES = [
    # (code, imports, modules, preamble_key, (body_start_line, body_start_column))
    ("", "", (), "", (1, 0)),
    ("theorem x : True := trivial", "", (), "", (1, 0)),
    ("import Mathlib\n", "import Mathlib", ("Mathlib",), "", (2, 0)),
    ("import Mathlib", "import Mathlib", ("Mathlib",), "", (2, 0)),
    ("import Mathlib\nopen Real", "import Mathlib", ("Mathlib",), "open Real", (3, 0)),
    (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
        "/-- doc -/\ntheorem x : True := trivial\n",
        "import Mathlib\nimport Aesop",
        ("Mathlib", "Aesop"),
        "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat",
        (7, 0),
    ),
    # Submodules are never collapsed; duplicates are dropped from the key only.
    (
        "import Mathlib.Data.Real.Basic\nimport Mathlib.Tactic\nimport Mathlib.Data.Real.Basic\nexample : True := trivial",
        "import Mathlib.Data.Real.Basic\nimport Mathlib.Tactic\nimport Mathlib.Data.Real.Basic",
        ("Mathlib.Data.Real.Basic", "Mathlib.Tactic"),
        "",
        (4, 0),
    ),
    # One module per `import` keyword: the second name is body (Lean: parse error).
    ("import Mathlib Aesop\nexample", "import Mathlib", ("Mathlib",), "", (1, 14)),
    ("import A B\nimport C", "import A", ("A",), "", (1, 8)),
    # A header command may share its line with the body, or span lines.
    ("import Mathlib theorem t : True := trivial", "import Mathlib", ("Mathlib",), "", (1, 14)),
    ("import\n  Mathlib\ntheorem t : True := trivial", "import Mathlib", ("Mathlib",), "", (3, 0)),
    ("import /- c -/ Mathlib -- d\nexample", "import Mathlib", ("Mathlib",), "", (2, 0)),
    ("import A /- x\n y -/ import B\nexample", "import A\nimport B", ("A", "B"), "", (3, 0)),
    ("import A /- x -/ theorem t := 1", "import A", ("A",), "", (1, 8)),
    # module / prelude / public / meta / all (Lean's module system).
    (
        "module\n\nprelude\npublic import A\nmeta import B\nimport all C\npublic meta import all D.E\npublic section\n",
        "module\nprelude\npublic import A\nmeta import B\nimport all C\npublic meta import all D.E",
        ("A", "B", "C", "D.E"),
        "",
        (8, 0),
    ),
    ("module\nimport A\nimport A\nexample", "module\nimport A\nimport A", ("A",), "", (4, 0)),
    (
        "prelude\nimport Init.Core\nopen Nat\nexample",
        "prelude\nimport Init.Core",
        ("Init.Core",),
        "open Nat",
        (4, 0),
    ),
    # `public` not followed by `import` is a command: the header ends before it.
    ("import A\npublic section\nexample", "import A", ("A",), "", (2, 0)),
    ("public def x := 1", "", (), "", (1, 0)),
    # `import` without a module, or `import all` alone: left to Lean, in the body.
    ("import A\nimport\nexample", "import A", ("A",), "", (2, 0)),
    ("import all\nexample", "", (), "", (1, 0)),
    ("prelude import", "prelude", (), "", (1, 7)),
    # Command modifiers stay in the body.
    (
        "import Mathlib\nopen Real in\ntheorem x : π > 3 := sorry",
        "import Mathlib",
        ("Mathlib",),
        "",
        (2, 0),
    ),
    ("open Nat\nset_option maxRecDepth 2048 in\nexample := 1", "", (), "open Nat", (2, 0)),
    ("set_option pp.all true in theorem t : True := trivial", "", (), "", (1, 0)),
    ("open Real in theorem t : True := trivial", "", (), "", (1, 0)),
    # Continuation lines: the command (and all after it) stays in the body.
    ("import Mathlib\nopen Real\n  Nat\nexample", "import Mathlib", ("Mathlib",), "", (2, 0)),
    ("open Real\n  Nat\nexample", "", (), "", (1, 0)),
    ("open Nat\n  hiding add_comm\nexample", "", (), "", (1, 0)),
    ("open Real\nin\nexample", "", (), "", (1, 0)),
    ("open A\nopen B\n  C\nexample", "", (), "open A", (2, 0)),
    ("open A\nNat.succ_le\n", "", (), "", (1, 0)),
    ("set_option maxHeartbeats\n  400000\nexample", "", (), "", (1, 0)),
    ("set_option maxHeartbeats 400000\n  in\nexample", "", (), "", (1, 0)),
    ("open A /- c\n -/ theorem t := 1", "", (), "", (1, 0)),
    ("open A /- c -/ theorem t := 1", "", (), "", (1, 0)),
    # A doc comment belongs to the declaration after it.
    (
        "import Mathlib\n/-- The answer. -/\ndef answer := 42",
        "import Mathlib",
        ("Mathlib",),
        "",
        (2, 0),
    ),
    (
        "import Mathlib\n/--\nmulti-line doc\n-/\ndef answer := 42",
        "import Mathlib",
        ("Mathlib",),
        "",
        (2, 0),
    ),
    ("open A\n/-- d -/\ntheorem t := 1", "", (), "open A", (2, 0)),
    ("open A\n@[simp] theorem t := 1", "", (), "open A", (2, 0)),
    ("open A\n#eval 1", "", (), "open A", (2, 0)),
    ('open A\nscoped notation "x" => 1', "", (), "open A", (2, 0)),
    ("open A\nirreducible_def f : Nat := 1", "", (), "open A", (2, 0)),
    # Comments are whitespace; a module doc ends the header (an import after it is body).
    (
        "/- Copyright\n /- nested -/ still comment\n-/\nimport Mathlib\n/-!\n# Title\n-/\nopen Real\ntheorem t := 1",
        "import Mathlib",
        ("Mathlib",),
        "open Real",
        (9, 0),
    ),
    ("import A -- trailing\nopen B -- why\nexample", "import A", ("A",), "open B", (3, 0)),
    ("open A /- c -/ B\nexample", "", (), "open A B", (2, 0)),
    ("/-! doc -/\nimport A", "", (), "", (1, 0)),
    # Imports after another command are not imports.
    ("import A\nopen B\nimport C\nexample", "import A", ("A",), "open B", (3, 0)),
    ("set_option x true\nimport A", "", (), "set_option x true", (2, 0)),
    # A comment that does not close: the scanner stops in front of it.
    ("import A\n/- note\n-/ theorem t := 1", "import A", ("A",), "", (2, 0)),
    ("import A\n/- unterminated\nopen B\n", "import A", ("A",), "", (2, 0)),
    # Two commands on one line, or a keyword among the names.
    ("open Real theorem t : True := trivial", "", (), "", (1, 0)),
    (
        "open Nat (succ zero)\nopen Function hiding Injective\nopen scoped BigOperators\nexample",
        "",
        (),
        "open Nat (succ zero)\nopen Function hiding Injective\nopen scoped BigOperators",
        (4, 0),
    ),
    (
        "open Function renaming Injective → Inj\nexample",
        "",
        (),
        "open Function renaming Injective → Inj",
        (2, 0),
    ),
    ('set_option trace.x "a -- b"\nexample', "", (), 'set_option trace.x "a -- b"', (2, 0)),
    ('set_option trace.x "a  b"\nexample', "", (), 'set_option trace.x "a  b"', (2, 0)),
    ("set_option x\nexample", "", (), "", (1, 0)),
    ("set_option x y z\nexample", "", (), "", (1, 0)),
    ('set_option x "open\nexample', "", (), "", (1, 0)),
    ("open «Weird  Name»  X\nexample", "", (), "open «Weird  Name» X", (2, 0)),
    # Line ends, BOM, tabs, blank lines with whitespace.
    ("import A\r\nopen B\r\n\r\ntheorem t := 1\r\n", "import A", ("A",), "open B", (3, 0)),
    ("\ufeffimport A\nexample", "import A", ("A",), "", (2, 0)),
    ("\ufeffimport A example", "import A", ("A",), "", (1, 8)),
    ("import\tA\n\t\nopen\tB  C \nexample", "import A", ("A",), "open B C", (4, 0)),
    ("   \n\t\n-- only comments\n", "", (), "", (1, 0)),
    ("\n\n\n", "", (), "", (1, 0)),
    ("#eval 1", "", (), "", (1, 0)),
    ("namespace Foo\nopen Bar", "", (), "", (1, 0)),
]


@pytest.mark.parametrize("code, imports, modules, preamble_key, body_start", CASES)
def test_cases(headers, code, imports, modules, preamble_key, body_start):
    split = headers.split_header(code)
    assert (
        split.imports,
        split.modules,
        split.preamble_key,
        (split.body_start_line, split.body_start_column),
    ) == (
        imports,
        modules,
        preamble_key,
        body_start,
    )
    check_invariants(code, split)


def test_preamble_keeps_line_and_column(headers):
    code = (
        "/- c -/ import A\n\n  /- x -/ open Real -- r\nset_option maxHeartbeats 0\n\ntheorem t := 1"
    )
    split = headers.split_header(code)
    assert (
        split.preamble
        == "\n\n" + " " * len("  /- x -/ ") + "open Real\nset_option maxHeartbeats 0\n"
    )
    assert split.imports == "import A"
    assert split.body == "\ntheorem t := 1"
    assert split.padded_body == "\n\n\n\n\ntheorem t := 1"


def test_header_only_and_empty(headers):
    split = headers.split_header("import Mathlib\nopen Real\n")
    assert split.body == "" and split.body_start_line == 3
    assert split.preamble == "\nopen Real\n"
    split = headers.split_header("")
    assert fields(split) == ("", "", (), "", "", "", 1, 0)
    assert split.padded_body == ""


def test_header_split_is_frozen(headers):
    split = headers.split_header("import A\nexample")
    with pytest.raises(dataclasses.FrozenInstanceError):
        split.body = "x"
    assert dataclasses.fields(split)
    assert isinstance(split, headers.HeaderSplit)


def test_rejects_non_str(headers):
    with pytest.raises(TypeError):
        headers.split_header(b"import A")


# -- generated snippets ----------------------------------------------------------

_header_lines = st.sampled_from(
    [
        "import Mathlib",
        "import Mathlib.Data.Nat.Basic",
        "import A B",
        "  import Aesop -- search",
        "import",
        "  Mathlib",
        "import Mathlib theorem t : True := trivial",
        "module",
        "prelude",
        "public import A",
        "meta import B",
        "import all C",
        "public section",
        "  hiding add_comm",
        "  Nat",
        "in",
        "open Real",
        "open scoped BigOperators",
        "open Nat in",
        "open Foo (bar)",
        "set_option maxHeartbeats 400000",
        "set_option maxHeartbeats 400000 in",
        'set_option trace.x "s -- t"',
        "",
        "   ",
        "\t",
        "-- comment",
        "/- block -/",
        "/- open",
        "nested /- -/ still",
        "-/",
        "-/ open Real",
        "/-! module doc",
        "/-- doc",
        "/-- doc -/",
        "theorem t : True := trivial",
        "example := 1",
        "  by simp",
        "#eval 1",
        "«odd»",
        '"',
        "open «a b»",
    ]
)
_snippets = st.tuples(
    st.lists(_header_lines, max_size=12),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.booleans(),
).map(lambda t: ("\ufeff" if t[2] else "") + t[1].join(t[0]) + (t[1] if t[3] else ""))


@settings(max_examples=1500, deadline=None)
@given(code=_snippets)
def test_generated_snippets(code):
    python, native = both("headers")
    split = python.split_header(code)
    check_invariants(code, split)
    assert fields(split) == fields(native.split_header(code))


@settings(max_examples=500, deadline=None)
@given(
    code=st.text(
        alphabet=st.sampled_from(list('imporset_ n/-!"«»\r\n\t ABx.') + ["\ufeff", "⊢", "𝓝"]),
        max_size=80,
    )
)
def test_random_text(code):
    python, native = both("headers")
    split = python.split_header(code)
    check_invariants(code, split)
    assert fields(split) == fields(native.split_header(code))
