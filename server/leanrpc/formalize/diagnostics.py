"""Reading Lean's messages: unknown names, error categories, feedback text for the model."""

from __future__ import annotations

import re
from typing import Iterable

from leanrpc.results import Message, Severity, VerifyResult

# Lean 4 core spells these several ways across versions:
#   unknown identifier 'Nat.foo'      unknown constant 'Nat.foo'
#   Unknown identifier `Nat.foo`      Unknown constant `Nat.foo`
# Names may contain primes (`foo'`), so a quoted name ends at the last quote
# before whitespace or the end of the text, not at the first one.
_UNKNOWN = re.compile(
    r"[Uu]nknown (?:identifier|constant) (?:'(?P<q>[^\s]+?)'(?=\s|$|[.,:;)])|`(?P<b>[^`]+)`)",
)

CATEGORIES = ("unknown_ident", "syntax", "typeclass", "type_mismatch", "other")

_CATEGORY_PATTERNS = (
    ("unknown_ident", re.compile(r"[Uu]nknown (?:identifier|constant|namespace)")),
    (
        "syntax",
        re.compile(
            r"unexpected token|expected term|unexpected end of input|expected '|expected token|"
            r"unterminated|invalid syntax|unknown command|expected command"
        ),
    ),
    ("typeclass", re.compile(r"failed to synthesize|typeclass instance problem")),
    (
        "type_mismatch",
        re.compile(
            r"type mismatch|application type mismatch|has type[\s\S]*but is expected to have type"
        ),
    ),
)


def unknown_identifiers(messages: Iterable[Message]) -> list[str]:
    """Names from unknown identifier/constant errors, in order, without duplicates."""
    seen: dict[str, None] = {}
    for m in messages:
        if m.severity != Severity.ERROR:
            continue
        for match in _UNKNOWN.finditer(m.text):
            name = (match.group("q") or match.group("b") or "").strip().lstrip("@")
            name = name.replace("«", "").replace("»", "")
            if name:
                seen.setdefault(name, None)
    return list(seen)


def classify(text: str) -> str:
    """The category of one error message (its first line decides most cases)."""
    for name, pattern in _CATEGORY_PATTERNS:
        if pattern.search(text):
            return name
    return "other"


def first_error(result: VerifyResult) -> Message | None:
    return next((m for m in result.messages if m.severity == Severity.ERROR), None)


def error_category(result: VerifyResult) -> str | None:
    """Category of the first error; None when the result has no error message."""
    m = first_error(result)
    return classify(m.text) if m is not None else None


def format_errors(result: VerifyResult, *, line_offset: int = 0, limit: int = 800) -> str:
    """The errors as `line L, col C: text` lines, relative to the candidate, cut to `limit` chars.

    `line_offset` is the number of lines before the candidate in the verified code
    (the header), so positions point into the statement the model wrote.
    """
    lines = []
    for m in result.messages:
        if m.severity != Severity.ERROR:
            continue
        line = max(1, m.start.line - line_offset)
        lines.append(f"line {line}, col {m.start.column}: {m.text.strip()}")
    if not lines and result.error:
        lines.append(result.error.strip())
    text = "\n".join(lines)
    return truncate(text, limit)


def format_feedback(
    result: VerifyResult, candidate: str, *, line_offset: int = 0, limit: int = 800
) -> str:
    """Errors with the candidate's source line under each, then the goal Lean had at each sorry.

    Positions are relative to the candidate (`line_offset` lines of header come
    first in the verified code); the whole text is cut to `limit` characters.
    """
    source = candidate.splitlines()
    parts = []
    for m in result.messages:
        if m.severity != Severity.ERROR:
            continue
        line = m.start.line - line_offset
        shown = max(1, line)
        parts.append(f"line {shown}, col {m.start.column}: {m.text.strip()}")
        if 1 <= line <= len(source):
            parts.append(f"  {line} | {source[line - 1]}")
            parts.append("    " + " " * len(str(line)) + "  " + " " * m.start.column + "^")
    if not parts and result.error:
        parts.append(result.error.strip())
    for s in result.sorries:
        if s.goal.strip():
            where = f" (line {max(1, s.start.line - line_offset)})" if s.start is not None else ""
            parts.append(f"goal at sorry{where}:\n{s.goal.strip()}")
    return truncate("\n".join(parts), limit)


def error_count(result: VerifyResult) -> int:
    return sum(1 for m in result.messages if m.severity == Severity.ERROR)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = " …[truncated]"
    return text[: max(0, limit - len(marker))] + marker
