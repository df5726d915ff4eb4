"""The statement queries, their answers, and the comparison.

For each pinned name three commands, each on its own line of one REPL
command (so each answer is found by its line):

1. ``set_option pp.all true in #check @NAME``: the elaborated type with every
   implicit argument, instance and universe printed. A user `instance` or
   `notation` that changes what the statement means changes this text.
2. ``set_option pp.all true in #print NAME``: the kind (``theorem``, ``def``,
   ``axiom``, ``opaque``...) and, for a definition, its body; for a type
   (``structure``, ``inductive``, ``class``) the whole text (fields or
   constructors and their types) must be the reference's.
3. ``#print axioms NAME``: the axioms the declaration depends on.

`compare` answers None when the snippet's env holds the reference's
declarations faithfully, else the first failure as a ReferenceCheck.
"""

from __future__ import annotations

import dataclasses
import re

from ..results import ReferenceCheck, ReferenceReason
from .parse import Reference

__all__ = ["DeclAnswer", "compare", "query_command", "read_answers"]

QUERIES_PER_NAME = 3
_AXIOMS = re.compile(r"depends on axioms: \[(?P<axioms>[^\]]*)\]")
_NO_AXIOMS = re.compile(r"does not depend on any axioms")
_ATTRIBUTES = re.compile(r"^\s*(?:@\[[^\]]*\]\s*)*")
# The header words Lean's `mkHeader` (src/Lean/Elab/Print.lean) writes before the
# kind: `unsafe`/`partial`, `private`, `protected`, `meta` (after the `@[…]` list).
_MODIFIERS = frozenset("private protected noncomputable unsafe partial nonrec public meta".split())
_KINDS = frozenset(
    "theorem def axiom opaque inductive structure class constructor recursor quotient".split()
)
DETAIL_CHARS = 400


@dataclasses.dataclass
class DeclAnswer:
    """What one env said about one name (None: no answer on that line)."""

    type_text: str | None = None
    print_text: str | None = None
    axioms: list[str] | None = None
    errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def kind(self) -> str | None:
        if self.print_text is None:
            return None
        words = _ATTRIBUTES.sub("", self.print_text).split()
        for word in words[:6]:
            if word in _KINDS:
                return word
            if word not in _MODIFIERS:
                return None
        return None

    @property
    def body(self) -> str | None:
        """The definition's value as `#print` shows it (after the first ``:=``)."""
        if self.print_text is None or ":=" not in self.print_text:
            return None
        return " ".join(self.print_text.split(":=", 1)[1].split())


def query_command(names: list[str]) -> str:
    """One REPL command asking the statement queries for every name.

    Each name is asked as `_root_.NAME` (Lean's `resolveExact`,
    src/Lean/ResolveName.lean: the root-namespace prefix names the declaration
    NAME exactly), so the answer is about the same declaration whatever
    namespaces the text before it left open: the REPL runs the query in the
    scopes the body ended in, and there a bare `X` names `N.X` first when a
    `namespace N` is still open (a reference cut after its last statement)."""
    lines = []
    for name in names:
        exact = f"_root_.{name}"
        lines.append(f"set_option pp.all true in #check @{exact}")
        lines.append(f"set_option pp.all true in #print {exact}")
        lines.append(f"#print axioms {exact}")
    return "\n".join(lines)


def read_answers(messages: list, names: list[str]) -> dict[str, DeclAnswer]:
    """Answers by name, from the messages of the `query_command` command.

    `messages` are (severity, line, text) triples; line 1 is the command's
    first line.
    """
    out = {name: DeclAnswer() for name in names}
    for severity, line, text in messages:
        index, query = divmod(line - 1, QUERIES_PER_NAME)
        if not 0 <= index < len(names):
            continue
        answer = out[names[index]]
        if severity == "error":
            answer.errors.append(text)
            continue
        if query == 0:
            answer.type_text = text if answer.type_text is None else answer.type_text + "\n" + text
        elif query == 1:
            answer.print_text = (
                text if answer.print_text is None else answer.print_text + "\n" + text
            )
        else:
            match = _AXIOMS.search(text)
            if match:
                answer.axioms = [a.strip() for a in match["axioms"].split(",") if a.strip()]
            elif _NO_AXIOMS.search(text):
                answer.axioms = []
    return out


def _words(text: str | None) -> list[str] | None:
    return None if text is None else text.split()


def _fail(reason: ReferenceReason, name: str, detail: str, reference: Reference) -> ReferenceCheck:
    return ReferenceCheck(
        passed=False,
        reason=reason,
        declaration=name,
        detail=detail[:DETAIL_CHARS],
        declarations=reference.names,
    )


def reference_problem(reference: Reference, answers: dict[str, DeclAnswer]) -> str | None:
    """Why the reference's own answers cannot serve as the pin, or None."""
    for decl in reference.decls:
        answer = answers.get(decl.name)
        if answer is None or answer.errors or answer.type_text is None or answer.kind is None:
            errors = "; ".join(answer.errors) if answer is not None else ""
            return f"{decl.name}: {errors or 'no answer to #check / #print'}"
    return None


def compare(
    reference: Reference,
    pinned: dict[str, DeclAnswer],
    snippet: dict[str, DeclAnswer],
    allowed_axioms: frozenset[str],
) -> ReferenceCheck:
    """The snippet's answers against the reference's (both from `read_answers`)."""
    for decl in reference.decls:
        name = decl.name
        want, got = pinned[name], snippet.get(name) or DeclAnswer()
        if got.type_text is None and got.print_text is None:
            detail = "; ".join(got.errors) or "no answer"
            return _fail(
                ReferenceReason.MISSING_DECLARATION,
                name,
                f"not in the snippet's env: {detail}",
                reference,
            )
        if got.errors or got.type_text is None or got.kind is None or got.axioms is None:
            detail = "; ".join(got.errors) or "a statement query went unanswered"
            return _fail(ReferenceReason.CHECK_INCOMPLETE, name, detail, reference)
        if got.kind != want.kind:
            return _fail(
                ReferenceReason.KIND_CHANGED,
                name,
                f"reference {want.kind}, snippet {got.kind}",
                reference,
            )
        if got.type_text != want.type_text:
            return _fail(
                ReferenceReason.STATEMENT_MISMATCH,
                name,
                f"reference: {want.type_text}\nsnippet: {got.type_text}",
                reference,
            )
        if decl.is_type and _words(got.print_text) != _words(want.print_text):
            return _fail(
                ReferenceReason.STATEMENT_MISMATCH,
                name,
                f"the {decl.kind} is not the reference's (fields, constructors or "
                f"parameters differ)\nreference: {want.print_text}\nsnippet: {got.print_text}",
                reference,
            )
        if decl.printed_kind == "def" and not decl.body_is_sorry and got.body != want.body:
            return _fail(
                ReferenceReason.BODY_CHANGED,
                name,
                f"reference: {want.body}\nsnippet: {got.body}",
                reference,
            )
        if "sorryAx" in got.axioms:
            return _fail(ReferenceReason.CONTAINS_SORRY, name, "depends on sorryAx", reference)
        forbidden = [a for a in got.axioms if a not in allowed_axioms]
        if forbidden:
            return _fail(
                ReferenceReason.FORBIDDEN_AXIOM,
                name,
                f"depends on {', '.join(forbidden)}",
                reference,
            )
    return ReferenceCheck(passed=True, declarations=reference.names)
