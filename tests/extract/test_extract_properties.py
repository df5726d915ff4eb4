"""Property tests: whatever the tree, the steps are valid.

Trees come from the recorded fixtures and the synthetic constructs, in every
form, then get damaged at random: nodes dropped (children lifted), kinds
and names removed, ranges made synthetic or moved anywhere (even outside
the text), nodes replaced by holes or `null`, pp set to the failure text,
children shuffled, junk nodes added. The extractor must never raise, and
its output must satisfy `check_invariants`.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import extract_synthetic as sc
from extract_fixtures import check_invariants, example_sources, recorded_cases
from infotree_builder import FAILED, full, project
from leanrpc.extract import extract_declarations

FORMS = ["full", "tactics", "original", "substantive"]


def _bases() -> list[tuple[str, str, list[Any]]]:
    bases = [(c.id, c.source, c.infotree) for c in recorded_cases()]
    for name, case in sorted(sc.CASES.items()):
        src, commands = case()
        tree = full(src, commands)
        for form in FORMS:
            bases.append((f"{name}/{form}", src.text, project(tree, form)))
    return bases


BASES = _bases()
SOURCES = example_sources()

KINDS = [
    "Lean.Parser.Term.byTactic",
    "by",
    "Lean.Parser.Tactic.tacticSeq",
    "Lean.Parser.Tactic.tacticSeq1Indented",
    "Lean.cdot",
    "Lean.Parser.Tactic.case",
    "Lean.Parser.Tactic.«tacticNext_=>_»",
    "Lean.Parser.Tactic.tacticHave_",
    "Lean.calcTactic",
    "Lean.calcSteps",
    "Lean.Parser.Tactic.Conv.conv",
    "Lean.Parser.Tactic.«tactic_<;>_»",
    "Lean.Parser.Tactic.exact",
    "Some.Unknown.kind",
    "",
]


def _random_pos(rng: random.Random, text: str, wild: bool) -> dict:
    lines = text.split("\n")
    if wild and rng.random() < 0.3:
        return {"line": rng.randint(-1, len(lines) + 2), "column": rng.randint(-1, 200)}
    line = rng.randint(1, len(lines))
    return {"line": line, "column": rng.randint(0, len(lines[line - 1]))}


def _random_range(rng: random.Random, text: str, wild: bool) -> dict:
    a, b = _random_pos(rng, text, wild), _random_pos(rng, text, wild)
    if not wild and (a["line"], a["column"]) > (b["line"], b["column"]):
        a, b = b, a
    return {"synthetic": rng.random() < 0.1, "start": a, "finish": b}


def _junk_node(rng: random.Random, text: str, depth: int) -> dict:
    width = rng.randint(0, 3) if depth < 3 else 0
    children = [_junk_node(rng, text, depth + 1) for _ in range(width)]
    return {
        "kind": "TacticInfo",
        "node": {
            "stx": {
                "range": _random_range(rng, text, wild=False),
                "pp": rng.choice(["x", FAILED, None]),
                "kind": rng.choice(KINDS),
                "argKinds": [],
            },
            "name": None,
            "goalsBefore": rng.choice([[], ["⊢ A"], ["⊢ A", "⊢ B"]]),
            "goalsAfter": rng.choice([[], ["⊢ B"]]),
        },
        "children": children,
    }


def _damage(item: Any, rng: random.Random, p: float, text: str) -> list[Any]:
    """A damaged copy of one tree element (a list: it may vanish or multiply)."""
    if not isinstance(item, dict):
        return [item]
    item = dict(item)
    children = item.get("children")
    if isinstance(children, list):
        new = [c for child in children for c in _damage(child, rng, p, text)]
        if rng.random() < p:
            rng.shuffle(new)
        if rng.random() < p / 2:
            new.insert(rng.randint(0, len(new)), _junk_node(rng, text, 1))
        item["children"] = new
    roll = rng.random
    if roll() < p:
        return list(item.get("children") or [])  # dropped: children lifted
    if roll() < p / 3:
        return [{"goalState": "⊢ hole"}] + list(item.get("children") or [])
    if isinstance(item.get("node"), dict):
        node = copy.deepcopy({k: v for k, v in item["node"].items()})
        stx = node.get("stx")
        if isinstance(stx, dict):
            if roll() < p:
                stx.pop("kind", None)
                node.pop("name", None)
            if roll() < p:
                stx.pop("argKinds", None)
            if roll() < p:
                stx["pp"] = FAILED
            if roll() < p and isinstance(stx.get("range"), dict):
                stx["range"]["synthetic"] = True
            if roll() < p:
                stx["range"] = _random_range(rng, text, wild=True)
            if roll() < p / 3:
                stx.pop("range", None)
        if roll() < p / 3:
            node["goalsBefore"] = None
        if roll() < p / 3:
            node = None
        item["node"] = node
    return [item]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(BASES),
    rng=st.randoms(use_true_random=False),
    p=st.sampled_from([0.0, 0.05, 0.15, 0.4]),
)
def test_damaged_trees_give_valid_steps(base, rng, p):
    _, source, tree = base
    damaged = [x for item in tree for x in _damage(item, rng, p, source)]
    if rng.random() < 0.1 and damaged:
        damaged = damaged[0]  # a single tree instead of an array
    decls = extract_declarations(damaged, source)
    check_invariants(decls, source)


@pytest.mark.parametrize("base", BASES, ids=lambda b: b[0])
def test_undamaged_bases_have_steps(base):
    _, source, tree = base
    decls = extract_declarations(tree, source)
    check_invariants(decls, source)
    assert any(d.steps for d in decls)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.sampled_from(SOURCES), rng=st.randoms(use_true_random=False))
def test_random_trees_on_real_sources(source, rng):
    _, text = source
    tree = [_junk_node(rng, text, 0) for _ in range(rng.randint(1, 6))]
    decls = extract_declarations(tree, text)
    check_invariants(decls, text)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            list("ab ·\n-/\"'()⟨⟩:=#@[]{}") + ["by", "--", "/-", "-/", "\n  ", "theorem x"]
        ),
        max_size=40,
    ).map("".join),
    rng=st.randoms(use_true_random=False),
)
def test_random_trees_on_random_text(text, rng):
    tree = [_junk_node(rng, text, 0) for _ in range(rng.randint(0, 4))]
    decls = extract_declarations(tree, text)
    check_invariants(decls, text)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["kind", "node", "children", "stx", "range", "goalsBefore", "start", "line"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(tree=_json)
def test_garbage_never_raises(tree):
    source = "theorem t : True := by\n  trivial\n"
    check_invariants(extract_declarations(tree, source), source)
