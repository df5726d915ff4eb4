"""Proof text in and out: closing a bare statement, assembling a found proof.

Owns: `prepare_code` (code with a `sorry`, or a bare statement closed with
`:= by sorry`; anything else is refused) and `assemble` (the user's code with
one sorry replaced by the tactic path, indented so Lean reads it as a tactic
block). Pure text functions. May import: errors.
"""

from __future__ import annotations

import re

from ...errors import RequestError

__all__ = ["assemble", "has_sorry", "prepare_code"]

_COMMENT = re.compile(r"--[^\n]*|/-.*?-/", re.S)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SORRY = re.compile(r"(?<![\w.'])sorry(?![\w'!?])")
_STATEMENT = re.compile(
    r"^[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:private|protected|noncomputable)[ \t]+)*"
    r"(?:theorem|lemma|example)\b",
    re.M,
)


def _code_only(text: str) -> str:
    """`text` with comments and string literals blanked (same length)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return _STRING.sub(blank, _COMMENT.sub(blank, text))


def has_sorry(body: str) -> bool:
    return _SORRY.search(_code_only(body)) is not None


def prepare_code(code: str, body: str) -> str:
    """The code to elaborate: as given when its body has a `sorry`; a bare
    statement (a theorem/lemma/example with no `:=`) closed with `:= by sorry`.

    Raises RequestError for a body with neither.
    """
    if has_sorry(body):
        return code
    plain = _code_only(body)
    if _STATEMENT.search(plain) and ":=" not in plain:
        return code.rstrip() + " := by sorry\n"
    raise RequestError(
        "the code has no `sorry` to start a proof from: write the statement with `:= by sorry` "
        "(or a bare `theorem name : statement`)"
    )


def _offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(text) + 1 for text in lines[: line - 1]) + column


def assemble(
    code: str, start: tuple[int, int], end: tuple[int, int], tactics: tuple[str, ...]
) -> str:
    """`code` with the sorry at [start, end) replaced by `tactics`, one per line.

    Positions are (1-based line, 0-based code-point column), as the REPL
    reports them. A sorry in tactic position (after `by`, `;`, `·`, `=>` or
    alone on its line) becomes the tactics at its column; a term sorry
    becomes `by` and the tactics indented under it.
    """
    lines = code.split("\n")
    a, b = _offset(lines, *start), _offset(lines, *end)
    before = code[:a]
    line_start = before.rfind("\n") + 1
    column = a - line_start
    head = before.rstrip()
    tactic_position = (not before[line_start:].strip()) or head.endswith(
        ("by", ";", "·", "=>", "<;>")
    )
    if tactic_position:
        indent = " " * column
        block = ("\n" + indent).join(t.strip("\n").replace("\n", "\n" + indent) for t in tactics)
    else:
        indent = " " * (len(before[line_start:]) - len(before[line_start:].lstrip()) + 2)
        block = (
            "by\n"
            + indent
            + ("\n" + indent).join(t.strip("\n").replace("\n", "\n" + indent) for t in tactics)
        )
    return code[:a] + block + code[b:]
