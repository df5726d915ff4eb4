"""Build infotrees shaped like the REPL's, for sources written in tests.

The shapes copy the recorded trees (shared/fixtures/repl/test/infotree_theorem,
kimina/derived/test_api_infotree_original_onepp.json and the `tactics` list
of repl/test/calc):

* a `by` block is `byTactic` -> the `by` token (pp "<failed to pretty
  print>", kind "by", name null) -> `tacticSeq` -> `tacticSeq1Indented` ->
  the tactics; every wrapper carries the goals of the whole block;
* `·` is `Lean.cdot` -> [the `·` token, tacticSeq];
* `calc` is `Lean.calcTactic` -> `Lean.calcSteps` (goals [] -> []) -> one
  `by` block per step proved by tactics;
* `have … := by` is `tacticHave_` -> synthetic macro expansion nodes -> the
  `by` block (its syntax is the user's, so its range is original);
* `full` wraps each command's tactic roots in CommandInfo / TermInfo /
  CustomInfo(null) noise and ends with the `eoi` CommandInfo.

`project(tree, form)` then applies the REPL's filters (`tactics`,
`original`, `substantive`) to a `full` tree.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

FAILED = "<failed to pretty print>"

SEQ = "Lean.Parser.Tactic.tacticSeq"
SEQ1 = "Lean.Parser.Tactic.tacticSeq1Indented"
BY = "Lean.Parser.Term.byTactic"
CDOT = "Lean.cdot"
CASE = "Lean.Parser.Tactic.case"
NEXT = "Lean.Parser.Tactic.«tacticNext_=>_»"
HAVE = "Lean.Parser.Tactic.tacticHave_"
LET = "Lean.Parser.Tactic.tacticLet_"
CALC = "Lean.calcTactic"
CALC_STEPS = "Lean.calcSteps"
CONV = "Lean.Parser.Tactic.Conv.conv"
CONV_SEQ = "Lean.Parser.Tactic.Conv.convSeq"
CONV_SEQ1 = "Lean.Parser.Tactic.Conv.convSeq1Indented"
THEN = "Lean.Parser.Tactic.«tactic_<;>_»"

# What the REPL's "substantive" filter drops (structure, not work).
NOT_SUBSTANTIVE = {BY, "by", SEQ, SEQ1, THEN, "Lean.Parser.Tactic.paren", "null", CDOT}


class Src:
    """A source text with helpers to find offsets and make positions."""

    def __init__(self, text: str) -> None:
        self.text = text

    def at(self, needle: str, nth: int = 0, start: int = 0) -> int:
        i = self.text.index(needle, start)
        for _ in range(nth):
            i = self.text.index(needle, i + 1)
        return i

    def span(self, needle: str, nth: int = 0, start: int = 0) -> tuple[int, int]:
        i = self.at(needle, nth, start)
        return i, i + len(needle)

    def pos(self, offset: int) -> dict:
        before = self.text[:offset]
        line = before.count("\n") + 1
        column = offset - (before.rfind("\n") + 1)
        return {"line": line, "column": column}


@dataclasses.dataclass
class N:
    """One TacticInfo node under construction (offsets into Src.text)."""

    kind: str
    start: int
    end: int
    before: list[str]
    after: list[str]
    children: list["N | dict"] = dataclasses.field(default_factory=list)
    pp: str | None = None
    synthetic: bool = False
    name: str | None = "same"  # "same": the TacticInfo name is the syntax kind

    def json(self, src: Src) -> dict:
        return {
            "node": {
                "stx": {
                    "range": {
                        "synthetic": self.synthetic,
                        "start": src.pos(self.start),
                        "finish": src.pos(self.end),
                    },
                    "pp": self.pp if self.pp is not None else src.text[self.start : self.end],
                    "kind": self.kind,
                    "argKinds": [],
                },
                "name": self.kind if self.name == "same" else self.name,
                "goalsBefore": list(self.before),
                "goalsAfter": list(self.after),
            },
            "kind": "TacticInfo",
            "children": [c.json(src) if isinstance(c, N) else c for c in self.children],
        }


# ---- leaves and wrappers ----------------------------------------------------------


def tac(
    src: Src, needle: str, before, after, kind: str, nth: int = 0, start: int = 0, children=()
) -> N:
    a, b = src.span(needle, nth, start)
    return N(kind, a, b, list(before), list(after), list(children))


def seq(items: list[N], before=None, after=None) -> N:
    before = items[0].before if before is None else before
    after = items[-1].after if after is None else after
    a, b = items[0].start, items[-1].end
    inner = N(SEQ1, a, b, before, after, list(items))
    return N(SEQ, a, b, before, after, [inner])


def by_block(src: Src, by_at: int, items: list[N], before=None, after=None) -> N:
    """`by` at offset by_at, then the items as its tactic sequence."""
    assert src.text.startswith("by", by_at)
    s = seq(items, before, after)
    token = N("by", by_at, by_at + 2, s.before, s.after, [s], pp=FAILED, name=None)
    return N(BY, by_at, s.end, s.before, s.after, [token])


def cdot(src: Src, at: int, items: list[N], before, after) -> N:
    token = N("·", at, at + 1, [items[0].before[0]], [items[0].before[0]], name=None)
    return N(CDOT, at, items[-1].end, before, after, [token, seq(items)])


def case(src: Src, at: int, items: list[N], before, after, kind: str = CASE) -> N:
    # evalCase focuses the tagged goal and runs the body under
    # `withTacticInfoContext` of the whole `case` syntax: a second node with
    # the same range and the focused goal, over `tacticSeq1Indented`.
    end = items[-1].end
    body = N(SEQ1, items[0].start, end, items[0].before, items[-1].after, list(items))
    inner = N(kind, at, end, [items[0].before[0]], items[-1].after, [body])
    return N(kind, at, end, before, after, [inner])


def next_(src: Src, at: int, items: list[N], before, after) -> N:
    # `next` is a macro for `case _ =>`: the expansion is synthetic, the
    # user's tactic sequence inside it is not.
    inner = N(CASE, at, items[-1].end, before, after, [seq(items)], synthetic=True)
    return N(NEXT, at, items[-1].end, before, after, [inner])


def have(src: Src, at: int, block: N, before, after, kind: str = HAVE) -> N:
    # `have … := by t` expands to `refine_lift have … := by t; ?_`, whose
    # nodes are synthetic; the `by` block keeps its original range.
    refine = N("Lean.Parser.Tactic.refine", at, block.end, before, after, [block], synthetic=True)
    lift = N(
        "Lean.Parser.Tactic.tacticRefine_lift_",
        at,
        block.end,
        before,
        after,
        [refine],
        synthetic=True,
    )
    return N(kind, at, block.end, before, after, [lift])


def calc(src: Src, at: int, steps_start: int, end: int, blocks: list[N], before, after) -> N:
    steps = N(CALC_STEPS, steps_start, end, [], [], list(blocks))
    return N(CALC, at, end, before, after, [steps])


def conv(src: Src, at: int, items: list[N], before, after, kind: str = CONV) -> N:
    a, b = items[0].start, items[-1].end
    inner = N(CONV_SEQ1, a, b, items[0].before, items[-1].after, list(items))
    s = N(CONV_SEQ, a, b, items[0].before, items[-1].after, [inner])
    return N(kind, at, b, before, after, [s])


def then(src: Src, first: N, second: list[N], before, after) -> N:
    """`first <;> second`, the second tactic run once per goal."""
    return N(THEN, first.start, second[-1].end, before, after, [first, *second])


# ---- commands and forms -----------------------------------------------------------


def term_info(src: Src, a: int, b: int, children=()) -> dict:
    return {
        "node": {
            "stx": {
                "range": {"synthetic": False, "start": src.pos(a), "finish": src.pos(b)},
                "pp": src.text[a:b],
                "kind": "ident",
                "argKinds": [],
            },
            "isBinder": False,
            "expr": src.text[a:b],
            "elaborator": None,
        },
        "kind": "TermInfo",
        "children": list(children),
    }


def command(src: Src, a: int, b: int, roots: list[N]) -> dict:
    """A CommandInfo as `full` prints it, with the usual noise around the roots."""
    noise = [
        term_info(
            src, a, min(a + 1, b), [{"kind": "CompletionInfo", "node": None, "children": []}]
        ),
        {"goalState": "⊢ True"},
    ]
    wrapped = [
        {
            "kind": "CustomInfo",
            "node": None,
            "children": [{"kind": "PartialTermInfo", "node": None, "children": []}, r.json(src)],
        }
        for r in roots
    ]
    return {
        "node": {
            "stx": {
                "range": {"synthetic": False, "start": src.pos(a), "finish": src.pos(b)},
                "pp": src.text[a:b],
                "kind": "Lean.Parser.Command.declaration",
                "argKinds": [],
            },
            "elaborator": "Lean.Elab.Command.elabDeclaration",
        },
        "kind": "CommandInfo",
        "children": noise + wrapped,
    }


def eoi(src: Src) -> dict:
    end = src.pos(len(src.text))
    return {
        "node": {
            "stx": {
                "range": {"synthetic": False, "start": end, "finish": end},
                "pp": "",
                "kind": "Lean.Parser.Command.eoi",
                "argKinds": ["«»"],
            },
            "elaborator": "Lean.Elab.Command.elabEoi",
        },
        "kind": "CommandInfo",
        "children": [],
    }


def full(src: Src, commands: list[tuple[int, int, list[N]]]) -> list[dict]:
    return [command(src, a, b, roots) for a, b, roots in commands] + [eoi(src)]


def project(tree: list[Any], form: str) -> list[Any]:
    """Apply the REPL's infotree filter `form` to a `full` tree."""
    if form == "full":
        return copy.deepcopy(tree)

    def keep(item: dict) -> bool:
        if item.get("kind") != "TacticInfo" or not isinstance(item.get("node"), dict):
            return False
        stx = item["node"]["stx"]
        if form == "original" and stx["range"]["synthetic"]:
            return False
        if form == "substantive" and stx.get("kind") in NOT_SUBSTANTIVE:
            return False
        return True

    def walk(item: Any) -> list[Any]:
        if not isinstance(item, dict):
            return []
        children = [c for child in item.get("children", []) for c in walk(child)]
        if keep(item):
            out = copy.deepcopy({k: v for k, v in item.items() if k != "children"})
            out["children"] = children
            return [out]
        return children

    return [x for item in tree for x in walk(item)]
