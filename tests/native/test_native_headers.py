"""split_header on both implementations: every Lean text in shared/, targeted
cases, and generated snippets."""

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from native_support import both, dataset_statements, lean_corpus

pytestmark = pytest.mark.timeout(120)

FIELDS = ("imports", "import_key", "modules", "preamble", "preamble_key", "body", "body_start_line")


def fields(split) -> tuple:
    return tuple(getattr(split, name) for name in FIELDS)


def header_lines(code: str, count: int) -> list[str]:
    """The first `count` lines as the splitter reads them (no CR, no BOM)."""
    lines = code.split("\n")[:count]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def check_invariants(code: str, split) -> None:
    lines = code.split("\n")
    start = split.body_start_line
    assert 1 <= start <= len(lines) + 1
    k = start - 1
    # The body is the user's text from its first line on, character for character.
    assert split.body == "\n".join(lines[k:])
    assert code.endswith(split.body)
    assert split.padded_body == "\n" * k + split.body
    if k < len(lines):
        assert split.padded_body.split("\n")[k:] == lines[k:]
    else:  # the whole text is header
        assert split.body == ""
    # The preamble has one line per header line, at the same line numbers, and
    # each keeps only characters of that line, at their columns (comments and
    # imports become spaces or nothing).
    assert split.preamble.count("\n") == k
    assert split.preamble == "" or split.preamble.endswith("\n")
    originals = header_lines(code, k)
    kept = split.preamble.split("\n")[:k]
    for original, line in zip(originals, kept):
        assert len(line) <= len(original)
        assert all(mine == theirs or mine == " " for mine, theirs in zip(line, original)), (original, line)
        assert line == "" or re.match(r"[ \t]*(open|set_option)\b", line), line
    commands = [line.strip() for line in kept if line.strip()]
    assert split.preamble_key == "\n".join(_collapse(command) for command in commands)
    # Import lines: taken from header lines, only comments removed.
    import_lines = split.imports.split("\n") if split.imports else []
    for line in import_lines:
        assert line.startswith("import ") or line.startswith("import\t")
        assert any(_is_masked_piece(line, original) for original in originals), line
    words = [word for line in import_lines for word in line.split()[1:]]
    assert list(split.modules) == list(dict.fromkeys(words))
    assert split.import_key == "\n".join(f"import {module}" for module in split.modules)
    assert type(split.modules) is tuple
    # An import only ever counts before the first other command.
    first_command = next((i for i, line in enumerate(kept) if line.strip()), k)
    for line in import_lines:
        assert any(_is_masked_piece(line, original) for original in originals[: first_command + 1]), line


def _collapse(command: str) -> str:
    # Whitespace runs become one space, except inside «names» and "strings".
    return re.sub(r'«[^»\n]*»|"(?:[^"\\\n]|\\.)*"|[ \t\r]+', lambda m: m.group() if m.group()[0] in '«"' else " ", command)


def _is_masked_piece(piece: str, original: str) -> bool:
    # `piece` is `original` with some characters blanked, then stripped.
    for start in range(len(original) - len(piece) + 1):
        window = original[start : start + len(piece)]
        if all(a == b or a == " " for a, b in zip(piece, window)):
            return True
    return False


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


_DECLARATION = re.compile(r"^(?:theorem|lemma|def|abbrev|example|structure|noncomputable|variable|/--|@\[|namespace|section)", re.M)


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
                assert _collapse(line.strip()) in split.preamble_key.split("\n"), (line, row["header"])
        declaration = _DECLARATION.search(row["statement"])
        if declaration is not None:
            assert row["statement"][declaration.start() :] in split.body
        if row["prefix"].startswith("/--"):
            assert row["prefix"] in split.body


# -- targeted cases --------------------------------------------------------------

CASES = [
    # (code, imports, modules, preamble_key, body_start_line)
    ("", "", (), "", 1),
    ("theorem x : True := trivial", "", (), "", 1),
    ("import Mathlib\n", "import Mathlib", ("Mathlib",), "", 2),
    ("import Mathlib", "import Mathlib", ("Mathlib",), "", 2),
    ("import Mathlib\nopen Real", "import Mathlib", ("Mathlib",), "open Real", 3),
    (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
        "/-- doc -/\ntheorem x : True := trivial\n",
        "import Mathlib\nimport Aesop",
        ("Mathlib", "Aesop"),
        "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat",
        8,
    ),
    # Submodules are never collapsed; duplicates are dropped from the key only.
    (
        "import Mathlib.Data.Real.Basic\nimport Mathlib.Tactic\nimport Mathlib.Data.Real.Basic\nexample : True := trivial",
        "import Mathlib.Data.Real.Basic\nimport Mathlib.Tactic\nimport Mathlib.Data.Real.Basic",
        ("Mathlib.Data.Real.Basic", "Mathlib.Tactic"),
        "",
        4,
    ),
    ("import A B\nimport C", "import A B\nimport C", ("A", "B", "C"), "", 3),
    # Command modifiers stay in the body.
    ("import Mathlib\nopen Real in\ntheorem x : π > 3 := sorry", "import Mathlib", ("Mathlib",), "", 2),
    ("open Nat\nset_option maxRecDepth 2048 in\nexample := 1", "", (), "open Nat", 2),
    ("set_option pp.all true in theorem t : True := trivial", "", (), "", 1),
    ("open Real in theorem t : True := trivial", "", (), "", 1),
    # A doc comment belongs to the declaration after it.
    ("import Mathlib\n/-- The answer. -/\ndef answer := 42", "import Mathlib", ("Mathlib",), "", 2),
    ("import Mathlib\n/--\nmulti-line doc\n-/\ndef answer := 42", "import Mathlib", ("Mathlib",), "", 2),
    # Module docs and block comments, nested, are header text.
    (
        "/- Copyright\n /- nested -/ still comment\n-/\nimport Mathlib\n/-!\n# Title\n-/\nopen Real\ntheorem t := 1",
        "import Mathlib",
        ("Mathlib",),
        "open Real",
        9,
    ),
    ("import A -- trailing\nopen B -- why\nexample", "import A", ("A",), "open B", 3),
    ("import A /- x\n y -/ import B\nexample", "import A\nimport B", ("A", "B"), "", 3),
    ("open A /- c -/ B\nexample", "", (), "open A B", 2),
    # Imports after another command are not imports.
    ("import A\nopen B\nimport C\nexample", "import A", ("A",), "open B", 3),
    ("set_option x true\nimport A", "", (), "set_option x true", 2),
    ("/-! doc -/\nimport A", "", (), "", 2),
    # A comment that closes on a body line: the body starts where it opened.
    ("import A\n/- note\n-/ theorem t := 1", "import A", ("A",), "", 2),
    ("import A\n/- unterminated\nopen B\n", "import A", ("A",), "", 2),
    # Two commands on one line, or a keyword among the names: not a header line.
    ("open Real theorem t : True := trivial", "", (), "", 1),
    ("import Mathlib theorem t : True := trivial", "", (), "", 1),
    ("open Nat (succ zero)\nopen Function hiding Injective\nopen scoped BigOperators\nexample", "", (), "open Nat (succ zero)\nopen Function hiding Injective\nopen scoped BigOperators", 4),
    ('set_option trace.x "a -- b"\nexample', "", (), 'set_option trace.x "a -- b"', 2),
    ('set_option trace.x "a  b"\nexample', "", (), 'set_option trace.x "a  b"', 2),
    ("set_option x\nexample", "", (), "", 1),
    ("set_option x y z\nexample", "", (), "", 1),
    ('set_option x "open\nexample', "", (), "", 1),
    ("open «Weird  Name»  X\nexample", "", (), "open «Weird  Name» X", 2),
    # Continuation lines of an open are not supported: the header ends there.
    ("open Real\n  Nat\nexample", "", (), "open Real", 2),
    # Line ends, BOM, tabs, blank lines with whitespace.
    ("import A\r\nopen B\r\n\r\ntheorem t := 1\r\n", "import A", ("A",), "open B", 4),
    ("\ufeffimport A\nexample", "import A", ("A",), "", 2),
    ("import\tA\n\t\nopen\tB  C \nexample", "import\tA", ("A",), "open B C", 4),
    ("   \n\t\n-- only comments\n", "", (), "", 4),
    ("-- c\n/- d -/", "", (), "", 3),
    ("\n\n\n", "", (), "", 4),
    ("#eval 1", "", (), "", 1),
    ("namespace Foo\nopen Bar", "", (), "", 1),
]


@pytest.mark.parametrize("code, imports, modules, preamble_key, body_start_line", CASES)
def test_cases(headers, code, imports, modules, preamble_key, body_start_line):
    split = headers.split_header(code)
    assert (split.imports, split.modules, split.preamble_key, split.body_start_line) == (
        imports,
        modules,
        preamble_key,
        body_start_line,
    )
    check_invariants(code, split)


def test_preamble_keeps_line_and_column(headers):
    code = "/- c -/ import A\n\n  /- x -/ open Real -- r\nset_option maxHeartbeats 0\n\ntheorem t := 1"
    split = headers.split_header(code)
    assert split.preamble == "\n\n" + " " * len("  /- x -/ ") + "open Real\nset_option maxHeartbeats 0\n\n"
    assert split.imports == "import A"
    assert split.body == "theorem t := 1"
    assert split.padded_body == "\n\n\n\n\ntheorem t := 1"


def test_header_only_and_empty(headers):
    split = headers.split_header("import Mathlib\nopen Real\n")
    assert split.body == "" and split.body_start_line == 3
    assert split.preamble == "\nopen Real\n"
    split = headers.split_header("")
    assert fields(split) == ("", "", (), "", "", "", 1)
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
@given(code=st.text(alphabet=st.sampled_from(list("imporset_ n/-!\"«»\r\n\t ABx.") + ["\ufeff", "⊢", "𝓝"]), max_size=80))
def test_random_text(code):
    python, native = both("headers")
    split = python.split_header(code)
    check_invariants(code, split)
    assert fields(split) == fields(native.split_header(code))
