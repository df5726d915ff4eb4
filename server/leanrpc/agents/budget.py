"""The output budget of one tool result: long texts cut, long lists shortened, with a note.

Owns: `fit(result, max_chars, max_field_chars)`. An agent pays for every
character it reads (its context window), and a REPL can answer with
megabytes of messages or goals. First every string longer than
`max_field_chars` is cut (its head kept, with how much was cut at its end);
then, while the result's JSON is still over `max_chars`, the longest list is
shortened from its end (never the lists with one entry per state or per
attempt: their entries' texts are cut shorter instead). The verdict fields (status, checks, state ids) are
short and never cut. When anything was cut the result gets `truncated`:
how many characters and items were cut, and that the verdict is whole.
Pure: plain dicts in and out. May import: the standard library only.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fit"]

# Keys whose values are never cut: the verdict and the handles an agent acts on.
_NOTE_ROOM = 400
_KEEP = frozenset({"status", "checks", "state_id", "proof_id", "code", "reason", "retry", "error"})
# Lists with one entry per handle or per request item: their entries are shortened, never dropped.
_WHOLE = frozenset({"states", "attempts", "opened"})
_SHORTEST_FIELD = 32


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _cut_strings(value: Any, limit: int, tally: dict) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        cut = len(value) - limit
        tally["chars"] += cut
        tally["fields"] += 1
        return value[:limit] + f"… [{cut} characters cut]"
    if isinstance(value, dict):
        return {
            k: (
                v
                if k in _KEEP and not isinstance(v, (list, dict))
                else _cut_strings(v, limit, tally)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_cut_strings(v, limit, tally) for v in value]
    return value


def _lists(value: Any, found: list, whole: bool = False) -> list:
    """Every non-empty list inside `value` whose items may go (to shorten in place)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in _KEEP:
                _lists(v, found, k in _WHOLE)
    elif isinstance(value, list):
        if value and not whole:
            found.append(value)
        for v in value:
            _lists(v, found)
    return found


def fit(result: dict[str, Any], max_chars: int, max_field_chars: int) -> dict[str, Any]:
    """`result` within `max_chars` of JSON (a new dict; `result` is left as it was)."""
    tally = {"chars": 0, "fields": 0, "items": 0}
    out = _cut_strings(result, max_field_chars, tally)
    size = _size(out)
    target = max_chars - _NOTE_ROOM  # the note itself fits in the budget too
    while size > target:
        lists = _lists(out, [])
        if not lists:
            break
        longest = max(lists, key=_size)
        freed, excess = 0, size - target
        while longest and freed < excess:  # items from its end until the excess is covered
            freed += _size(longest.pop()) + 2
            tally["items"] += 1
        tally["chars"] += freed
        size = _size(out)
    field = max_field_chars
    while size > target and field > _SHORTEST_FIELD:  # only whole lists left: shorter texts
        field //= 2
        out = _cut_strings(out, field, tally)
        size = _size(out)
    if tally["chars"]:
        out["truncated"] = {
            "chars_cut": tally["chars"],
            "fields_cut": tally["fields"],
            "items_dropped": tally["items"],
            "note": (
                f"output budget: {tally['chars']} characters cut "
                f"({tally['fields']} texts shortened, {tally['items']} list items dropped) "
                f"to fit {max_chars} characters ([mcp] max_output_chars, max_field_chars); "
                "the status, checks, state ids and one entry per state or attempt are whole"
            ),
        }
    return out
