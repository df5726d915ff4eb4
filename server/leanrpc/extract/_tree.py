"""Infotree JSON -> a forest of tactic nodes with offsets.

The REPL sends an array of trees (REPL-PROTOCOL.md §5.6). An element is
`{"kind": K, "node": N | null, "children": [...]}` or a hole
`{"goalState": "…"}`. Whatever the filter (`full`, `tactics`, `original`,
`substantive`), this module reduces it to what `original` would give: only
TacticInfo nodes whose syntax range is original (not synthetic) and lies in
the source. Every other element is transparent: its children move up to the
nearest kept ancestor, just as the REPL's own filters do. Holes, `null`
nodes, non-dict items and nodes with broken ranges are tolerated.

Top-level CommandInfo elements (present only with `full`) are kept apart as
command spans, so that steps can be grouped by command.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._source import SourceText

_FAILED_PP = "<failed to pretty print>"


@dataclasses.dataclass(slots=True)
class TacticNode:
    start: int  # offset, inclusive
    end: int  # offset, exclusive
    kind: str  # syntax kind (stx.kind, else the node's name), "" if unknown
    pp: str | None
    goals_before: list[str]
    goals_after: list[str]
    children: list["TacticNode"]
    order: int  # pre-order index in the original tree, for stable sorting


@dataclasses.dataclass(slots=True)
class CommandTree:
    """One top-level element of the array, reduced.

    `start`/`end` are set only for a CommandInfo with a usable range.
    """

    start: int | None
    end: int | None
    kind: str
    roots: list[TacticNode]


def build_forest(infotree: Any, text: SourceText) -> list[CommandTree]:
    if isinstance(infotree, dict):
        infotree = [infotree]
    if not isinstance(infotree, list):
        return []
    counter = [0]
    out: list[CommandTree] = []
    for item in infotree:
        if not isinstance(item, dict):
            continue
        span = None
        kind = ""
        if item.get("kind") == "CommandInfo" and isinstance(item.get("node"), dict):
            stx = item["node"].get("stx")
            span = _range(stx, text)
            kind = _syntax_kind(item["node"])
        roots = _reduce(item, text, counter)
        if span is None:
            out.append(CommandTree(None, None, kind, roots))
        else:
            out.append(CommandTree(span[0], span[1], kind, roots))
    return out


def _reduce(item: Any, text: SourceText, counter: list[int]) -> list[TacticNode]:
    """The kept nodes this element stands for: itself, or its lifted children.

    Iterative (explicit stack), so deep `full` trees cannot hit the
    recursion limit. Children are visited in pre-order; a dropped element's
    children land in its parent's list at the element's place.
    """
    result: list[TacticNode] = []
    stack: list[tuple[Any, list[TacticNode]]] = [(item, result)]
    while stack:
        current, target = stack.pop()
        if not isinstance(current, dict):
            continue
        kept = _tactic_node(current, text, counter)
        if kept is not None:
            target.append(kept)
            target = kept.children
        raw_children = current.get("children")
        if isinstance(raw_children, list):
            for child in reversed(raw_children):
                stack.append((child, target))
    return result


def _tactic_node(item: dict, text: SourceText, counter: list[int]) -> TacticNode | None:
    node = item.get("node")
    if item.get("kind") != "TacticInfo" or not isinstance(node, dict):
        return None
    stx = node.get("stx")
    span = _range(stx, text, allow_synthetic=False)
    if span is None:
        return None
    pp = stx.get("pp") if isinstance(stx, dict) else None
    counter[0] += 1
    return TacticNode(
        start=span[0],
        end=span[1],
        kind=_syntax_kind(node),
        pp=pp if isinstance(pp, str) else None,
        goals_before=_goals(node.get("goalsBefore")),
        goals_after=_goals(node.get("goalsAfter")),
        children=[],
        order=counter[0],
    )


def _syntax_kind(node: dict) -> str:
    stx = node.get("stx")
    if isinstance(stx, dict) and isinstance(stx.get("kind"), str) and stx["kind"]:
        return stx["kind"]
    name = node.get("name")
    if isinstance(name, str):
        return name
    return ""


def _goals(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [g if isinstance(g, str) else str(g) for g in value]


def _range(stx: Any, text: SourceText, allow_synthetic: bool = True) -> tuple[int, int] | None:
    if not isinstance(stx, dict):
        return None
    rng = stx.get("range")
    if not isinstance(rng, dict):
        return None
    # A missing flag counts as original; anything but false/absent does not.
    if not allow_synthetic and rng.get("synthetic") not in (False, None):
        return None
    start = _offset(rng.get("start"), text)
    finish = _offset(rng.get("finish"), text)
    if start is None or finish is None or finish < start:
        return None
    return start, finish


def _offset(pos: Any, text: SourceText) -> int | None:
    if not isinstance(pos, dict):
        return None
    return text.offset(pos.get("line"), pos.get("column"))


def is_failed_pp(node: TacticNode) -> bool:
    return node.pp == _FAILED_PP
