"""Lean's JSON rendering, reproduced byte for byte.

Lean prints REPL responses with ``Json.pretty`` (``Json.render`` laid out by
``Format.pretty`` at width 80). The layout rules, restated for JSON values:

* every object and array is a ``group`` wrapped in ``nest 1`` (``Format.bracket``);
  members are separated by ``"," ++ line``;
* every key/value pair is its own ``group`` of ``key ++ ":" ++ line ++ value``;
* keys come out in descending code-point order (the RBMap is folded from the
  left and each pair is consed onto the list);
* a group is printed flat when its flat width plus the text that follows it up
  to the next line break of an enclosing, broken group fits in ``80 - column``
  (Wadler's ``fits`` on the rest of the document, as ``Format.pushGroup`` does);
* nesting is relative to the enclosing *indentation*, not to the column, which
  for JSON always coincide because a broken value starts its own line.

Strings escape only ``"``, ``\\``, newline and carriage return with a
backslash; other characters below U+0020 become ``\\u00xx`` (lowercase hex);
everything else, including non-ASCII, is written raw.

``flat`` gives the one-line rendering that the stand-in uses by default, which
is also what Lean would print with an unbounded width.
"""

from __future__ import annotations

import re

__all__ = ["flat", "pretty", "render", "escape_string"]

WIDTH = 80

_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape_char(m: re.Match) -> str:
    c = m.group(0)
    if c == '"':
        return '\\"'
    if c == "\\":
        return "\\\\"
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    return "\\u%04x" % ord(c)


def escape_string(s: str) -> str:
    """Returns ``s`` as a quoted JSON string, escaped the way Lean does."""
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, s) + '"'


def flat(v) -> str:
    """One-line rendering: Lean's key order and separators, no width limit."""
    t = type(v)
    if t is str:
        return escape_string(v)
    if t is dict:
        if not v:
            return "{}"
        return (
            "{"
            + ", ".join(escape_string(k) + ": " + flat(v[k]) for k in sorted(v, reverse=True))
            + "}"
        )
    if t is list:
        return "[" + ", ".join(flat(x) for x in v) + "]"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if t is int:
        return str(v)
    return _number(v)


def _number(v) -> str:
    # Lean keeps numbers as (mantissa, exponent) and prints them without an
    # exponent; REPL responses only ever carry naturals, so this is a fallback.
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return repr(v)


def pretty(v, width: int = WIDTH) -> str:
    """``Json.pretty``: the width-80 layout Lean's REPL writes."""
    memo: dict[int, str] = {}
    f = _flat_memo(v, memo)
    if len(f) <= width:
        return f
    out: list[str] = []
    _layout(v, 0, 0, out, width, memo)
    return "".join(out)


def render(v, pretty_mode: bool) -> str:
    return pretty(v) if pretty_mode else flat(v)


def _flat_memo(v, memo: dict) -> str:
    # Flat text of every container, computed once per pretty() call.
    t = type(v)
    if t is dict:
        r = memo.get(id(v))
        if r is None:
            if v:
                r = (
                    "{"
                    + ", ".join(
                        escape_string(k) + ": " + _flat_memo(v[k], memo)
                        for k in sorted(v, reverse=True)
                    )
                    + "}"
                )
            else:
                r = "{}"
            memo[id(v)] = r
        return r
    if t is list:
        r = memo.get(id(v))
        if r is None:
            r = "[" + ", ".join(_flat_memo(x, memo) for x in v) + "]"
            memo[id(v)] = r
        return r
    return flat(v)


def _layout(v, col: int, trail: int, out: list, width: int, memo: dict) -> None:
    # ``col`` is the current column, which for every group laid out here is
    # also its indentation (see module docstring). ``trail`` is the width of
    # the text after ``v`` up to the next line break of a broken ancestor.
    f = _flat_memo(v, memo)
    if len(f) + trail <= width - col:
        out.append(f)
        return
    t = type(v)
    inner = col + 1
    sep = ",\n" + " " * inner
    if t is dict and v:
        keys = sorted(v, reverse=True)
        out.append("{")
        last = len(keys) - 1
        for i, k in enumerate(keys):
            kv_trail = 1 if i < last else 1 + trail
            ks = escape_string(k)
            val = v[k]
            vf = _flat_memo(val, memo)
            if len(ks) + 2 + len(vf) + kv_trail <= width - inner:
                out.append(ks)
                out.append(": ")
                out.append(vf)
            else:
                out.append(ks)
                out.append(":\n")
                out.append(" " * inner)
                _layout(val, inner, kv_trail, out, width, memo)
            if i < last:
                out.append(sep)
        out.append("}")
        return
    if t is list and v:
        out.append("[")
        last = len(v) - 1
        for i, x in enumerate(v):
            _layout(x, inner, 1 if i < last else 1 + trail, out, width, memo)
            if i < last:
                out.append(sep)
        out.append("]")
        return
    out.append(f)
