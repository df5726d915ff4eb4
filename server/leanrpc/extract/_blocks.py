"""Which tactic nodes are a block's items, and which of them are structural.

A *block* is a `by` block or a tactic sequence. Its *items* are the tactic
nodes found under it once wrapper nodes (`by`, the `by` token, `tacticSeq`,
`tacticSeq1Indented`, conv sequences, calc step lists) are seen through
(`block_items`), sorted and made disjoint (`disjoint`). An item is
*structural* (`structure` names its shape) when it is `·`, `case`, `next`,
`focus`, `conv`, `calc`, `induction`/`cases … with` and their `| alt =>`, or
`have`/`let`/`obtain`/… ending in `:= by`; the kind decides, or the text at
the node's start when the kind is missing or unfamiliar. The text tests
(`is_separator`, `binding_by`) say which stretches between items are mere
separators.

Owns: classifying nodes and stretches of text; no steps are made here
(that is `_extract`).
May import: the package's `_source` and `_tree`, and the standard library.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from ._source import SourceText
from ._tree import TacticNode, is_failed_pp

log = logging.getLogger("leanrpc.extract")

# Wrapper kinds, seen through when collecting a block's items.
_TRANSPARENT = frozenset(
    {
        "byTactic",
        "byTactic'",
        "by",
        "tacticSeq",
        "tacticSeq1Indented",
        "tacticSeqBracketed",
        "convSeq",
        "convSeq1Indented",
        "convSeqBracketed",
        "calcSteps",
        "calcFirstStep",
        "calcStep",
        "null",
    }
)

_STRUCTURAL_KINDS = {
    "cdot": "cdot",
    "case": "case",
    "case'": "case",
    "focus": "focus",
    "calcTactic": "calc",
    "calc": "calc",
    "conv": "conv",
    "induction": "alts",
    "cases": "alts",
    "inductionAlt": "alt",
}

_NOT_IDENT = r"(?![A-Za-z0-9_'!?₀-₉])"
_STRUCTURAL_TEXT = [
    (re.compile(r"[·.](?=\s)"), "cdot"),
    (re.compile(r"case'?" + _NOT_IDENT), "case"),
    (re.compile(r"next" + _NOT_IDENT), "next"),
    (re.compile(r"focus" + _NOT_IDENT), "focus"),
    (re.compile(r"calc" + _NOT_IDENT), "calc"),
    (re.compile(r"conv(?:_lhs|_rhs)?" + _NOT_IDENT), "conv"),
    (re.compile(r"(?:induction|cases)" + _NOT_IDENT), "alts"),
    (re.compile(r"\|"), "alt"),
    (
        re.compile(r"(?:have'?|haveI|let|letI|obtain|suffices|replace|show)" + _NOT_IDENT),
        "binding",
    ),
]
_BY_START = re.compile(r"by" + _NOT_IDENT)
_BY_END = re.compile(r"\sby$")
_ASSIGN_BY_END = re.compile(r":=\s*by$")
_SHOW_LIKE = re.compile(r"(?:suffices|show)" + _NOT_IDENT)


def short_kind(kind: str) -> str:
    return kind.replace("«", "").replace("»", "").rsplit(".", 1)[-1] if kind else ""


def structure(text: SourceText, node: TacticNode) -> str | None:
    short = short_kind(node.kind)
    if "<;>" in short or short in _TRANSPARENT:
        return None
    if short in _STRUCTURAL_KINDS:
        return _STRUCTURAL_KINDS[short]
    if short.startswith("tacticNext"):
        return "next"
    for pattern, shape in _STRUCTURAL_TEXT:
        if pattern.match(text.text, node.start, node.end):
            return shape
    return None


def same_span(a: TacticNode, b: TacticNode) -> bool:
    return a.start == b.start and a.end == b.end


def same_span_chain(node: TacticNode) -> list[TacticNode]:
    """The node and its descendants with exactly its range (through such nodes only)."""
    chain = [node]
    i = 0
    while i < len(chain):
        chain.extend(c for c in chain[i].children if same_span(c, node))
        i += 1
    return chain


def _is_transparent(text: SourceText, node: TacticNode) -> bool:
    short = short_kind(node.kind)
    if short:
        return short in _TRANSPARENT
    # No kind (older REPLs, hand-made trees): a `by` block, the bare `by`
    # token, or a node its children tile (a sequence wrapper).
    if is_failed_pp(node) or _BY_START.match(text.text, node.start, node.end):
        return True
    return _children_tile(text, node)


def _children_tile(text: SourceText, node: TacticNode) -> bool:
    children = sorted(node.children, key=lambda c: (c.start, -c.end))
    if not children:
        return False
    cursor = node.start
    for child in children:
        if child.start < cursor or child.end > node.end:
            return False
        if not is_separator(text, cursor, child.start):
            return False
        cursor = child.end
    return is_separator(text, cursor, node.end)


def block_items(text: SourceText, nodes: list[TacticNode]) -> list[TacticNode]:
    """The items of a block: nodes with wrappers seen through, disjoint, sorted."""
    items: list[TacticNode] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if _is_transparent(text, node):
            stack.extend(reversed(node.children))
        else:
            items.append(node)
    return disjoint(items)


def disjoint(nodes: list[TacticNode]) -> list[TacticNode]:
    """Sorted by start (outer and earlier-visited first); drop what overlaps a kept node.

    Nodes with exactly the range of the last kept node are one step run
    several times (`t <;> assumption` runs `assumption` once per goal):
    they are merged into that step, so no goal disappears from the
    sequence. A run that continues the kept one (its goals before are the
    kept goals after) extends it; otherwise the goals are joined. Every
    other dropped node is logged (debug level, logger leanrpc.extract).
    """
    ordered = sorted(nodes, key=lambda n: (n.start, -n.end, n.order))
    kept: list[TacticNode] = []
    for node in ordered:
        if node.end <= node.start:
            continue
        if kept and node.start == kept[-1].start and node.end == kept[-1].end:
            kept[-1] = _merge_same_span(kept[-1], node)
            continue
        if kept and node.start < kept[-1].end:
            log.debug(
                "extract: dropped node %s [%d, %d) overlapping kept %s [%d, %d)",
                node.kind,
                node.start,
                node.end,
                kept[-1].kind,
                kept[-1].start,
                kept[-1].end,
            )
            continue
        kept.append(node)
    return kept


def _merge_same_span(first: TacticNode, again: TacticNode) -> TacticNode:
    if list(again.goals_before) == list(first.goals_after):
        return dataclasses.replace(first, goals_after=list(again.goals_after))
    before = list(first.goals_before) + [
        g for g in again.goals_before if g not in first.goals_before
    ]
    after = list(first.goals_after) + [g for g in again.goals_after if g not in first.goals_after]
    return dataclasses.replace(first, goals_before=before, goals_after=after)


# ---- text tests ---------------------------------------------------------------

_SEPARATOR_CHARS = frozenset(";)]}⟩,")
TOKEN_ONLY = frozenset(";{}()[]⟨⟩,<>")


def is_separator(text: SourceText, start: int, end: int) -> bool:
    """Only whitespace, comments, `;` and closing brackets in [start, end)."""
    for i in range(start, end):
        if not text.is_trivia(i) and text.text[i] not in _SEPARATOR_CHARS:
            return False
    return True


def binding_by(text: SourceText, start: int, end: int) -> bool:
    """The head ends in `:= by`, or is `suffices …/show … by`."""
    code = text.code(start, end).rstrip()
    if _ASSIGN_BY_END.search(code):
        return True
    return _SHOW_LIKE.match(code) is not None and _BY_END.search(code) is not None
