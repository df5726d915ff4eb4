"""Stand-in `#eval`: version string, string literals, natural-number arithmetic.

Owns: what `#eval` answers in plausible mode. May import: standin.lexer, standin.syntax.
"""

from __future__ import annotations

import re

from .lexer import message, norm
from .syntax import Command


def evaluate_command(cmd: Command, text: str, P, msgs: list, lean_version: str) -> None:
    first = cmd.toks[0]
    expr = norm(text[cmd.toks[1].start : cmd.end]) if len(cmd.toks) > 1 else ""
    if expr in ("Lean.versionString", "Lean.versionStringCore"):
        data = '"' + lean_version + ' (leanrpc stand-in)"'
    elif len(cmd.toks) == 2 and cmd.toks[1].kind == "str":
        data = cmd.toks[1].text
    else:
        value = _arith(expr)
        if value is None:
            return
        data = str(value)
    msgs.append(message("info", P(first.start), P(first.end), data))


_ARITH_OK = re.compile(r"^[\d\s+\-*/%()^]+$")
_ARITH_TOK = re.compile(r"\d+|[-+*/%()^]")


def _arith(expr: str):
    """Natural-number arithmetic with Lean's truncated subtraction; or None."""
    if not expr or not _ARITH_OK.match(expr):
        return None
    toks = _ARITH_TOK.findall(expr)
    k = 0

    def atom():
        nonlocal k
        if k < len(toks) and toks[k] == "(":
            k += 1
            v = add()
            if k >= len(toks) or toks[k] != ")":
                raise ValueError
            k += 1
            return v
        if k < len(toks) and toks[k].isdigit():
            k += 1
            return int(toks[k - 1])
        raise ValueError

    def power():
        nonlocal k
        v = atom()
        if k < len(toks) and toks[k] == "^":
            k += 1
            e = power()
            if e > 4096 or v.bit_length() * e > 1 << 16:
                raise ValueError
            v = v**e
        return v

    def mul():
        nonlocal k
        v = power()
        while k < len(toks) and toks[k] in "*/%":
            op = toks[k]
            k += 1
            w = power()
            v = v * w if op == "*" else (0 if w == 0 else (v // w if op == "/" else v % w))
        return v

    def add():
        nonlocal k
        v = mul()
        while k < len(toks) and toks[k] in "+-":
            op = toks[k]
            k += 1
            w = mul()
            v = v + w if op == "+" else max(0, v - w)
        return v

    try:
        v = add()
    except (ValueError, IndexError):
        return None
    return v if k == len(toks) else None


_COMPARE = re.compile(r"^(?P<lhs>[^=≠<>≤≥]+)(?P<op>=|≠|<|≤|>|≥)(?P<rhs>[^=≠<>≤≥]+)$")
_TESTS = {
    "=": lambda a, b: a == b,
    "≠": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "≤": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "≥": lambda a, b: a >= b,
}


def decide_refutes(statement: str) -> bool:
    """Whether `decide` proves a closed comparison of natural-number arithmetic
    false (`2 + 3 = 6`), which real Lean reports as "tactic 'decide' proved that
    the proposition … is false". Anything else (variables, other types): False."""
    match = _COMPARE.match(norm(statement))
    if match is None:
        return False
    lhs, rhs = _arith(match["lhs"].strip()), _arith(match["rhs"].strip())
    if lhs is None or rhs is None:
        return False
    return not _TESTS[match["op"]](lhs, rhs)
