"""Recorded infotrees from shared/fixtures, and the invariant checks all tests share."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

from leanrpc.extract import ExtractedDeclaration, slice_source

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
if not (SHARED / "fixtures").is_dir():
    raise RuntimeError(
        f"shared fixtures not found at {SHARED}; the repo must sit next to the shared folder"
    )
FIXTURES = SHARED / "fixtures"
KIMINA_ONEPP = FIXTURES / "kimina" / "derived" / "test_api_infotree_original_onepp.json"
ONEPP_SOURCE = "theorem onepp : 1+1 = 2:= by rfl"


@dataclasses.dataclass
class RecordedCase:
    id: str
    source: str
    infotree: list[Any]
    form: str


def _json_chunks(path: Path) -> list[Any]:
    chunks = [c for c in path.read_text(encoding="utf-8").split("\n\n") if c.strip()]
    return [json.loads(c) for c in chunks]


def recorded_cases() -> list[RecordedCase]:
    """Every recorded response with an `infotree`, paired with its request's `cmd`."""
    cases: list[RecordedCase] = []
    for out in sorted(FIXTURES.rglob("*.expected.out")):
        if "infotree" not in out.read_text(encoding="utf-8"):
            continue
        requests = _json_chunks(out.with_name(out.name.replace(".expected.out", ".in")))
        responses = _json_chunks(out)
        for i, (req, resp) in enumerate(zip(requests, responses)):
            if isinstance(resp, dict) and "infotree" in resp and "cmd" in req:
                cases.append(
                    RecordedCase(
                        id=f"{out.relative_to(FIXTURES)}#{i}",
                        source=req["cmd"],
                        infotree=resp["infotree"],
                        form=req.get("infotree", ""),
                    )
                )
    cases.append(
        RecordedCase(
            id="kimina/onepp",
            source=ONEPP_SOURCE,
            infotree=json.loads(KIMINA_ONEPP.read_text(encoding="utf-8")),
            form="original",
        )
    )
    return cases


def example_sources() -> list[tuple[str, str]]:
    """Real Lean sources without infotrees (Kimina's demos and match inputs)."""
    paths = sorted((FIXTURES / "kimina" / "examples").glob("*.lean"))
    paths += sorted((FIXTURES / "kimina" / "match" / "input").glob("*.lean"))[:30]
    paths += sorted((FIXTURES / "repl" / "test").glob("*.lean"))
    return [(p.name, p.read_text(encoding="utf-8")) for p in paths]


def tactic_nodes(tree: Any) -> Iterator[dict]:
    """Every TacticInfo node dict in a raw tree, any form."""
    stack = list(tree) if isinstance(tree, list) else [tree]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        if item.get("kind") == "TacticInfo" and isinstance(item.get("node"), dict):
            yield item["node"]
        children = item.get("children")
        if isinstance(children, list):
            stack.extend(children)


def _key(pos) -> tuple[int, int]:
    return pos.line, pos.column


def check_invariants(decls: list[ExtractedDeclaration], source: str) -> None:
    """Sorted, non-overlapping, inside the declaration, exact text; rebuilds the proof."""
    previous_end = (0, 0)
    for decl in decls:
        assert _key(decl.start) >= previous_end, "declarations overlap"
        assert _key(decl.start) <= _key(decl.end)
        previous_end = _key(decl.end)
        cursor = decl.start
        rebuilt = []
        for step in decl.steps:
            assert _key(step.start) < _key(step.end), f"empty step {step}"
            assert _key(step.start) >= _key(cursor), f"overlap or unsorted at {step}"
            assert _key(step.end) <= _key(decl.end), f"step outside its declaration: {step}"
            assert step.text == slice_source(source, step.start, step.end)
            assert step.text == step.text.strip(), f"untrimmed step {step.text!r}"
            if rebuilt:
                rebuilt.append(slice_source(source, cursor, step.start))
            rebuilt.append(step.text)
            cursor = step.end
            assert isinstance(step.kind, str)
            assert all(isinstance(g, str) for g in step.goals_before + step.goals_after)
        if decl.steps:
            first, last = decl.steps[0], decl.steps[-1]
            assert "".join(rebuilt) == slice_source(source, first.start, last.end)
