"""Infotree -> per-declaration tactic steps.

    infotree JSON ──_tree.build_forest──> tactic nodes (original, offsets)
                                            │   grouped by command
    source text ──_commands.split_commands──┘   (CommandInfo or text)
                                            │
                       per command: block items of its tactic roots
                                            │   _emit: leaf step, or
                                            │   structural = pieces + inner items
                                            ▼
                       sort, drop overlaps, keep inside the command

A *block* is a `by` block or a tactic sequence. Its *items* are the tactic
nodes found under it once wrapper nodes (`by`, the `by` token, `tacticSeq`,
`tacticSeq1Indented`, conv sequences, calc step lists) are seen through.
Each item is one step, unless it is *structural* (`·`, `case`, `next`,
`focus`, `conv`, `calc`, `induction`/`cases … with` and their `| alt =>`,
or `have`/`let`/`obtain`/… ending in `:= by`). A structural item is cut
into its own text pieces (the head before its first inner item, the text
between inner blocks, the tail; calc pieces are cut further at each calc
step's line) and its inner items, each emitted the same way. Structure is
recognised from the syntax kind, or from the text at the node's start when
the kind is missing or unfamiliar. A `by` token is therefore never the start of a
step: at top level it stays in the gap before the first step (it belongs to
the declaration's `:= by`), in a structural item it ends the head
(`have h : P := by`).

Every step's text is exactly the source between its start and end, with
leading and trailing whitespace and comments cut off (they fall into the
gaps). Steps never overlap, so the steps and the gaps between them rebuild
the source from the first step's start to the last step's end.

Owns: the steps (`extract_declarations`): grouping tactic trees by command,
emitting leaf and structural steps, cutting calc pieces. Which nodes are
items and which are structural is `_blocks`.
May import: leanrpc.results, the package's `_blocks`, `_commands`, `_source`,
`_tree`, `_units`, and the standard library.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from typing import Any

from leanrpc.results import Position

from ._blocks import (
    TOKEN_ONLY,
    binding_by,
    block_items,
    disjoint,
    is_separator,
    same_span,
    same_span_chain,
    short_kind,
    structure,
)
from ._commands import describe_command, split_commands
from ._source import SourceText
from ._tree import TacticNode, build_forest
from ._units import ReplayUnit, group_units


@dataclasses.dataclass(slots=True)
class TacticStep:
    text: str  # exact source text, start..end
    start: Position
    end: Position  # exclusive
    goals_before: list[str]
    goals_after: list[str]
    kind: str  # syntax kind of the node the text comes from, "" if unknown
    # Index into ExtractedDeclaration.units of the outermost tactic this step is part of.
    unit: int = 0


@dataclasses.dataclass(slots=True)
class ExtractedDeclaration:
    name: str  # "" for `example` and anonymous instances
    start: Position  # the command's span in the source
    end: Position
    steps: list[TacticStep]
    units: list[ReplayUnit] = dataclasses.field(default_factory=list)


def extract_declarations(infotree: Any, source: str) -> list[ExtractedDeclaration]:
    """Cut the tactic proofs in `source` into non-overlapping steps.

    Args:
        infotree: the REPL's `infotree` array, any filter (`original` is the
            intended one; `full`, `tactics` and `substantive` also work).
            Malformed parts are skipped, never raised on.
        source: the text whose positions the infotree uses (the user's full
            text when the body was sent padded with newlines).

    Returns:
        One entry per command that is a declaration or holds tactic steps,
        in source order, with steps sorted and non-overlapping.
    """
    text = SourceText(source)
    commands = _commands(text, build_forest(infotree, text))
    out: list[ExtractedDeclaration] = []
    for command in commands:
        steps, items = _command_steps(text, command)
        if not steps and not command.keyword:
            continue
        public = [_public_step(text, s) for s in steps]
        out.append(
            ExtractedDeclaration(
                name=command.name,
                start=text.position(command.start),
                end=text.position(command.end),
                steps=public,
                units=group_units(text.text, steps, items, public),
            )
        )
    return out


# ---- commands -----------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Command:
    start: int
    end: int
    keyword: str
    name: str
    roots: list[TacticNode]


def _commands(text: SourceText, forest: list) -> list[_Command]:
    commands: list[_Command] = []
    orphans: list[TacticNode] = []
    for tree in forest:
        usable = (
            tree.start is not None
            and tree.end is not None
            and tree.end > tree.start
            and short_kind(tree.kind) != "eoi"
        )
        if usable:
            keyword, name = describe_command(text, tree.start, tree.end)
            commands.append(_Command(tree.start, tree.end, keyword, name, list(tree.roots)))
        else:
            orphans.extend(tree.roots)
    # Commands found in the text fill in where no CommandInfo says anything.
    known = sorted((c.start, c.end) for c in commands)
    known_starts = [a for a, _ in known]
    reach = list(itertools.accumulate((b for _, b in known), max, initial=-1))
    for span in split_commands(text):
        # Known spans starting before this one ends; does any reach into it?
        i = bisect.bisect_left(known_starts, span.end)
        if reach[i] <= span.start:
            commands.append(_Command(span.start, span.end, span.keyword, span.name, []))
    commands.sort(key=lambda c: c.start)
    # A tactic block outside any CommandInfo goes to the command it starts in
    # (the last one starting at or before it).
    starts = [c.start for c in commands]
    for root in orphans:
        i = bisect.bisect_right(starts, root.start) - 1
        if commands:
            commands[max(i, 0)].roots.append(root)
        else:
            commands.append(_Command(root.start, root.end, "", "", [root]))
            starts.append(root.start)
    # A command must contain its tactic blocks. Stretch it over them, then
    # merge commands that now overlap (a heuristic cut went through a proof).
    for command in commands:
        for root in command.roots:
            command.start = min(command.start, root.start)
            command.end = max(command.end, root.end)
    commands.sort(key=lambda c: (c.start, -c.end))
    merged: list[_Command] = []
    for command in commands:
        if merged and command.start < merged[-1].end:
            last = merged[-1]
            last.end = max(last.end, command.end)
            last.roots.extend(command.roots)
            if not last.keyword and command.keyword:
                last.keyword, last.name = command.keyword, command.name
        else:
            merged.append(command)
    return merged


# ---- steps --------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Step:
    start: int
    end: int
    goals_before: list[str]
    goals_after: list[str]
    kind: str
    item: int = 0  # index of the outermost block item it was emitted from


def _public_step(text: SourceText, step: _Step) -> TacticStep:
    return TacticStep(
        text=text.text[step.start : step.end],
        start=text.position(step.start),
        end=text.position(step.end),
        goals_before=list(step.goals_before),
        goals_after=list(step.goals_after),
        kind=step.kind,
    )


def _command_steps(text: SourceText, command: _Command) -> tuple[list[_Step], list[TacticNode]]:
    steps: list[_Step] = []
    items = block_items(text, command.roots)
    for number, item in enumerate(items):
        emitted = len(steps)
        _emit(text, item, steps)
        for step in steps[emitted:]:
            step.item = number
    steps.sort(key=lambda s: (s.start, -s.end))
    kept: list[_Step] = []
    last_end = command.start
    for step in steps:
        if step.start >= last_end and step.end <= command.end and step.end > step.start:
            kept.append(step)
            last_end = step.end
    return kept, items


def _emit(text: SourceText, node: TacticNode, out: list[_Step]) -> None:
    shape = None
    for same in same_span_chain(node):
        shape = structure(text, same)
        if shape is not None:
            break
    if shape is not None and _emit_structural(text, node, shape, out):
        return
    start, end = text.trim(node.start, node.end)
    # Lean also records the `;` separators of a sequence and the `{` of a
    # bracketed one as tactic nodes; such tokens are not steps.
    if end > start and not all(c in TOKEN_ONLY for c in text.text[start:end]):
        out.append(_Step(start, end, node.goals_before, node.goals_after, node.kind))


def _emit_structural(text: SourceText, node: TacticNode, shape: str, out: list[_Step]) -> bool:
    """Emit a structural tactic as pieces plus inner items; False if it does not fit."""
    # Lean often nests a second node with the tactic's own range (e.g.
    # `case` runs its body under `withTacticInfoContext` of the whole
    # syntax, with the focused goal); see through those.
    children = [
        c for same in same_span_chain(node) for c in same.children if not same_span(c, node)
    ]
    items = [c for c in block_items(text, children) if c.start > node.start]
    items = disjoint([c for c in items if c.end <= node.end])
    if not items and shape != "calc":
        return False
    # Text not covered by inner items: the head, the stretches between
    # items, and the tail. Stretches that are only trivia or separators are
    # gaps inside one block; the others are pieces of this tactic.
    bounds = [node.start] + [x for c in items for x in (c.start, c.end)] + [node.end]
    pieces: list[tuple[int, int, int]] = []  # (start, end, index of next item or -1)
    for k in range(len(items) + 1):
        start, end = text.trim(bounds[2 * k], bounds[2 * k + 1])
        if end <= start:
            continue
        if k > 0 and is_separator(text, start, end):
            continue
        pieces.append((start, end, k if k < len(items) else -1))
    if shape == "binding":
        # Only `have … := by` and the like: one `by` block that ends the tactic.
        head = pieces[0] if pieces and pieces[0][2] == 0 else None
        tail = text.trim(items[-1].end, node.end)
        if head is None or len(pieces) != 1 or tail[1] > tail[0]:
            return False
        if not binding_by(text, head[0], head[1]):
            return False
    for start, end, nxt in pieces:
        after = items[nxt].goals_before if nxt >= 0 else node.goals_after
        if shape == "calc":
            subs = _calc_split(text, node, start, end)
        else:
            subs = [(start, end)]
        for j, (a, b) in enumerate(subs):
            last = j == len(subs) - 1
            out.append(
                _Step(a, b, node.goals_before, after if last else node.goals_before, node.kind)
            )
    for item in items:
        _emit(text, item, out)
    return True


def _calc_split(text: SourceText, node: TacticNode, start: int, end: int) -> list[tuple[int, int]]:
    """Cut a calc piece at the lines where a new calc step begins.

    A step begins on a line whose first code character is at or left of the
    column of the first step (the first code after `calc`). The `calc`
    keyword stays with the first step.
    """
    first, _ = text.trim(min(node.start + 4, node.end), node.end)
    if first >= node.end:
        return [(start, end)]
    step_col = text.column(first)
    cuts = []
    line_start = text.line_start_of(start)
    src = text.text
    while True:
        nl = src.find("\n", line_start, end)
        if nl == -1:
            break
        line_start = nl + 1
        i = line_start
        while i < end and src[i] in " \t\r":
            i += 1
        if i >= end or src[i] == "\n" or text.in_comment(i):
            continue
        if i > first and i > start and text.column(i) <= step_col:
            cuts.append(i)
    subs = []
    a = start
    for cut in cuts:
        b = text.trim_end(a, cut)
        if b > a:
            subs.append((a, b))
        a = cut
    subs.append((a, end))
    return subs
