"""Replay units: the outermost tactics of a declaration's proof.

Owns: `ReplayUnit` and `group_units`. A unit is the smallest text that runs
alone in tactic mode: a leaf step, or a structural tactic (`have … := by`,
`·`, `case`, `calc`, `conv`, `induction … with`) with all its pieces and inner
steps. Extract's replay check (services.extract) runs one unit at a time and
compares the goals after it with the outermost node's goalsAfter. Pure; may
import nothing of the project.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(slots=True)
class ReplayUnit:
    """One outermost tactic of a declaration's proof: the smallest text that runs
    alone in tactic mode (a structural tactic with all its pieces and inner steps)."""

    first: int  # index of its first step
    last: int  # index of its last step (inclusive)
    text: str  # exact source from the first step's start to the last step's end
    goals_before: list[str]
    goals_after: list[str]  # the outermost tactic node's own goalsAfter


def group_units(source: str, steps: list, items: list, public: list) -> list[ReplayUnit]:
    """Groups consecutive steps by the outermost tactic they come from.

    `steps` have `start`/`end` offsets and `item` (index into `items`, the
    outermost tactic nodes); `public` are the TacticSteps, whose `unit` is set.
    """
    units: list[ReplayUnit] = []
    for index, step in enumerate(steps):
        if units and steps[units[-1].first].item == step.item:
            units[-1].last = index
            continue
        item = items[step.item]
        units.append(ReplayUnit(index, index, "", list(item.goals_before), list(item.goals_after)))
    for number, unit in enumerate(units):
        unit.text = source[steps[unit.first].start : steps[unit.last].end]
        for k in range(unit.first, unit.last + 1):
            public[k].unit = number
    return units
