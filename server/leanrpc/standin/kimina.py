"""Kimina proof outputs: recorded messages for a proof, matched on its "core".

Source: ``kimina/match/input/*.lean`` with ``output/*.json`` under the
fixtures root. A proof's *core* is its text from the first line that is not a
comment, an import, or an ``open``/``set_option`` line (see ``core_of``); a
text whose core was recorded gets the recorded messages back, their lines
shifted to where the core starts in the new text.

Owns: reading the Kimina pairs, the table of recorded outputs (``record``),
matching a text against it (``match``) and a match's messages for the text
(``replayed``).
May import: leanrpc.core, the stand-in's ``elab`` and ``state`` (``map_lines``), and
the standard library.
"""

from __future__ import annotations

import json
import os
import re

from ..core.leantext import find_block_comment_end
from . import elab
from .state import map_lines

__all__ = [
    "body_start_line",
    "core_of",
    "kimina_pairs",
    "kimina_response",
    "match",
    "record",
    "replayed",
]

_OPEN_OR_OPTION = re.compile(r"^(open|set_option)\b")
_TRAILING_IN = re.compile(r"\bin\s*$")
_QUERY_LINE = re.compile(r"(?:set_option \S+ \S+ in )?#(?:print|check)\b")


def core_of(text: str) -> tuple[str, int]:
    """(core text, 1-based line where it starts); see the module docstring of __main__."""
    lines = text.split("\n")
    n = len(lines)
    i = 0
    while i < n:
        s = lines[i].strip()
        if not s or s.startswith("--"):
            i += 1
            continue
        if s.startswith("/-"):
            j, rest = _block_comment_end(lines, i)
            if j is None or rest:
                break
            i = j + 1
            continue
        if s.startswith("import ") or s == "import":
            i += 1
            continue
        if _OPEN_OR_OPTION.match(s) and not _TRAILING_IN.search(s):
            i += 1
            continue
        break
    return "\n".join(lines[i:]).rstrip(), i + 1


def _block_comment_end(lines: list[str], i: int):
    """(line index where the comment opened on line i closes, the rest of
    that line stripped), or (None, "") if it never closes."""
    text = "\n".join(lines[i:])
    end = find_block_comment_end(text, text.find("/-"))
    if end < 0:
        return None, ""
    line_end = text.find("\n", end)
    return i + text.count("\n", 0, end), text[end : len(text) if line_end < 0 else line_end].strip()


def body_start_line(text: str) -> int:
    """Kimina's body start: the first non-blank line after the imports."""
    _, off = elab.split_header(text)
    m = re.compile(r"\S").search(text, off)
    if m is None:
        return text.count("\n") + 1
    return text.count("\n", 0, m.start()) + 1


def kimina_pairs(root: str) -> list[tuple[str, str]]:
    inp = os.path.join(root, "kimina", "match", "input")
    out = os.path.join(root, "kimina", "match", "output")
    if not os.path.isdir(inp):
        return []
    pairs = []
    for n in sorted(os.listdir(inp)):
        if n.endswith(".lean"):
            j = os.path.join(out, n[:-5] + ".json")
            if os.path.isfile(j):
                pairs.append((os.path.join(inp, n), j))
    return pairs


def kimina_response(path: str):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    results = data.get("results") or []
    if not results:
        return None
    return results[0].get("response")


def record(root: str, problems: list) -> dict:
    """The table core -> (messages, core line relative to the body, recorded seconds)."""
    table: dict[str, tuple] = {}
    for lean_path, json_path in kimina_pairs(root):
        name = os.path.basename(lean_path)[:-5]
        try:
            resp = kimina_response(json_path)
        except (OSError, ValueError):
            resp = None
        if not isinstance(resp, dict):
            problems.append(f"kimina/{name}: no recorded response (the server reported an error)")
            continue
        with open(lean_path, encoding="utf-8") as f:
            text = f.read()
        core, core_line = core_of(text)
        if not core:
            continue
        body_line = body_start_line(text)
        messages = [m for m in resp.get("messages") or [] if isinstance(m, dict)]
        cost = resp.get("time")
        entry = (
            messages,
            core_line - body_line + 1,
            float(cost) if isinstance(cost, (int, float)) else 0.0,
        )
        if core in table and table[core][0] != messages:
            problems.append(f"kimina/{name}: same proof as an earlier input with other messages")
            continue
        table.setdefault(core, entry)
    return table


def match(table: dict, text: str):
    """(messages with user line numbers, recorded seconds, the line the trailing
    queries start on or None) or None.

    A text that is a recorded proof followed by query lines (`#print axioms`,
    `#check`, `#print`, each maybe under `set_option … in`: the checks a server
    writes after a body, in the body's command) matches that proof; the queries'
    answers are not recorded, so they are the caller's to give (its elaboration)."""
    core, line = core_of(text)
    if not core:
        return None
    hit = table.get(core)
    tail = None
    if hit is None:
        lines = core.split("\n")
        kept = len(lines)
        while kept > 1 and _QUERY_LINE.match(lines[kept - 1]):
            kept -= 1
            hit = table.get("\n".join(lines[:kept]).rstrip())
            if hit is not None:
                tail = line + kept
                break
        if hit is None:
            return None
    messages, core_line, cost = hit
    shift = line - core_line
    if shift:
        messages = [_shift_message(m, shift) for m in messages]
    return messages, cost, tail


def replayed(hit, elaborated: list, line_map: list[int] | None) -> tuple[list, float]:
    """A `match`'s messages, in the text's lines where the match read the text with
    its fault directives stripped (`line_map`: stripped line -> the text's), then the
    elaborated answers (`elaborated`, the text's lines) of the queries after the
    recorded proof; and the proof's recorded seconds."""
    messages, cost, tail = hit
    if line_map is not None:
        messages = map_lines(messages, line_map)
        tail = None if tail is None else line_map[tail - 1]
    if tail is not None:
        messages = [*messages, *(m for m in elaborated if m["pos"]["line"] >= tail)]
    return messages, cost


def _shift_message(m: dict, shift: int) -> dict:
    m = dict(m)
    for k in ("pos", "endPos"):
        p = m.get(k)
        if isinstance(p, dict) and type(p.get("line")) is int:
            m[k] = dict(p, line=p["line"] + shift)
    return m
