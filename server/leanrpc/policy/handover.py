"""Code a snippet hands to a standard tactic, which runs it: where the `proof` policy reads
a tactic's options and clauses in context (docs/SECURITY.md, "The code policy").

Owns: `context_marks` (where such a tactic or clause may be, for the lexer to look),
`handed_over` (the verdict on one identifier token: construct and reason, or None) and
the exact-token walks it reads with (`exact_tokens`, `group`). policy/reading.py's reader
asks it at the identifiers it concerns (`add`, lists.CODE_CONFIG_TACTICS, a name starting
with lists.AESOP_PREFIX) and turns a verdict into its refusal.

What is refused, read after the tactic's name (Lean takes options on the next lines too):
- any configuration item, `(config := …)` or `(field := …)`, of a tactic whose
  configuration holds code it runs (lists.CODE_CONFIG_TACTICS: `linarith`'s `discharger`,
  `solve_by_elim`'s `discharge`, …): the configuration is evaluated, then they run;
- an `(add …)` clause after a tactic named `aesop…` (lists.AESOP_PREFIX), and after any
  other tactic a `(` then `add` opening a group that holds what marks an Aesop rule (a
  phase, a builder, a percent priority; Aesop/Frontend/RuleExpr.lean): a rule naming a
  constant of tactic type, which a `def` of the snippet can be, is evaluated by Aesop's
  `tactic` builder, which its default builder tries first. A named argument
  `(add := …)` and a term `(add a b)` are not clauses.

setup.py compiles this file unchanged with Cython as policy.handover_c (its marks run on
every snippet); policy/reading.py picks the build. Why not the generated list: these
tactics run fixed code unless handed some, so their names cannot be refused (real proofs
use `nlinarith` everywhere); only what is handed over is. Text in, verdict out. May import: re, leanrpc.core.lexer, leanrpc.core.needles,
leanrpc.policy.lists.
"""

from __future__ import annotations

import re

from ..core.lexer import IDENT, SYMBOL
from ..core.needles import positions
from .lists import AESOP_PREFIX, CODE_CONFIG_TACTICS

__all__ = ["CONTEXT_TACTICS", "context_marks", "exact_tokens", "group", "handed_over"]

_HANDED = "a configuration of a tactic whose configuration holds code it runs (evaluated while "
_HANDED += "Lean elaborates)"
_AESOP = "an Aesop rule added in the call (a constant of tactic type is evaluated)"

# The tactics read in context, as the needle search finds them (`!` forms included).
CONTEXT_TACTICS = tuple(sorted({t.rstrip("!") for t in CODE_CONFIG_TACTICS} | {AESOP_PREFIX}))
# Where a context tactic may take options: the rest of its name, then (over spaces, line
# breaks and line comments) a character that may begin an option, a clause or a block
# comment before one. Anything else (a `[` term list, `only`, `<;>`, the next tactic, the
# end) shows that none follows, so the usual `nlinarith [sq_nonneg x]` costs no lexing.
# This only chooses where the lexer looks; what is there is the lexer's reading.
_OPTIONS_FOLLOW = re.compile(r"[\w!?'.]*+[ \t\r\n]*+(?:--[^\n]*+\n[ \t\r\n]*+)*+[(+\-*/]")
# `add` as a whole word. (A look-behind in the pattern would cost Python's search its
# literal start: 117 µs per real proof against 5; the character before is checked after.)
_ADD = re.compile(r"add(?![\w'!?])")
# What marks an Aesop rule: a phase, a builder, or a percent priority (`50%`, which stands
# for the `unsafe` phase); a term has none of them.
_AESOP_RULE_WORDS = frozenset(
    {"safe", "norm", "unsafe", "tactic", "apply", "forward", "destruct", "constructors"}
    | {"cases", "cases_type", "unfold", "simp"}
)


def context_marks(text: str) -> list[int]:
    """Offsets where the lexer must read a token for `handed_over`: a context tactic that
    may take options, an `add` that may open an Aesop clause."""
    match = _OPTIONS_FOLLOW.match
    marks = [at for at in positions(text, CONTEXT_TACTICS) if match(text, at)]
    if "add" in text:
        marks.extend(at for m in _ADD.finditer(text) if _add_clause(text, at := m.start()))
    return marks


def handed_over(lexer, text: str, i: int, raw: str) -> tuple[str, str] | None:
    """(construct, reason) when identifier token `i` (spelled `raw`) hands code to a
    tactic, else None."""
    if raw == "add":
        token = lexer.get(i, exact=True)
        if (
            _add_clause(text, token.start)
            and not _named(lexer, text, i + 1)
            and _aesop_rule_within(lexer, text, i + 1)
        ):
            return "(add …)", _AESOP
        return None
    if raw in CODE_CONFIG_TACTICS:
        return _options(lexer, text, i + 1, raw, clause=None)
    if raw.startswith(AESOP_PREFIX):
        return _options(lexer, text, i + 1, raw, clause="add")
    return None


def exact_tokens(lexer, text: str, i: int):
    """(index, token, its text) of every token from `i` on, as the lexer reads them all."""
    while True:
        token = lexer.get(i, exact=True)
        if token is None:
            return
        yield i, token, text[token.start : token.end]
        i += 1


def group(lexer, text: str, i: int):
    """(index, token, text, whether it closes the group) of each token from `i` on, up to
    the `)` that closes the group `i` is in; to the end of the text if none does."""
    depth = 1
    for at, token, word in exact_tokens(lexer, text, i):
        if token.kind == SYMBOL and word == "(":
            depth += 1
        elif token.kind == SYMBOL and word == ")":
            depth -= 1
        yield at, token, word, depth == 0
        if depth == 0:
            return


def _options(lexer, text: str, i: int, tactic: str, clause: str | None) -> tuple[str, str] | None:
    """The options right after a tactic (token `i` on): flags (`+x`, `-x`, `*`) are passed
    over, and so are parenthesized groups; with `clause` None, a group that opens a
    configuration item (`(name :=`) is handed code, with `clause`, a group whose first word
    is it (Aesop's `(add …)`). Stops at anything else."""
    while True:
        token = lexer.get(i, exact=True)
        if token is None:
            return None
        word = text[token.start : token.end]
        if token.kind == SYMBOL and word in ("+", "-", "*"):
            i += 1
            continue
        if token.kind == IDENT and i > 0:
            before = lexer.get(i - 1, exact=True)
            if before is not None and before.kind == SYMBOL and before.end == token.start:
                if text[before.start : before.end] in ("+", "-"):
                    i += 1  # a flag's name
                    continue
        if token.kind != SYMBOL or word != "(":
            return None
        first = lexer.get(i + 1, exact=True)
        if first is None:
            return None
        head = text[first.start : first.end]
        if clause is None:
            if first.kind == IDENT and _named(lexer, text, i + 2):
                return f"{tactic} ({head} := …)", _HANDED
        elif first.kind == IDENT and head == clause:
            return f"{tactic} ({clause} …)", _AESOP
        closed = None
        for at, _token, _word, closes in group(lexer, text, i + 1):
            if closes:
                closed = at
        if closed is None:
            return None
        i = closed + 1


def _named(lexer, text: str, i: int) -> bool:
    """Tokens `i` and `i + 1` are `:=` (a named argument's, a configuration item's)."""
    colon, equals = lexer.get(i, exact=True), lexer.get(i + 1, exact=True)
    return (
        colon is not None
        and equals is not None
        and text[colon.start : colon.end] == ":"
        and text[equals.start : equals.end] == "="
        and equals.start == colon.end
    )


def _aesop_rule_within(lexer, text: str, i: int) -> bool:
    """The group that token `i` is in, up to its `)`, holds what marks an Aesop rule
    (`_AESOP_RULE_WORDS`, or a `%`). True where the group does not end (fail closed)."""
    for _at, token, word, closes in group(lexer, text, i):
        if closes:
            return False
        if (token.kind == IDENT and word in _AESOP_RULE_WORDS) or word == "%":
            return True
    return True


def _add_clause(text: str, at: int) -> bool:
    """Whether the `add` at `at` may open an Aesop clause: it is a whole word, and what
    comes before it (over spaces and line breaks) is a `(`, or may be a comment that
    follows one (a block comment's `/`, or a line break after a line holding `--`).
    Fail-closed: a division by a variable named `add` is read as a clause too."""
    k = at - 1
    if k >= 0 and (text[k].isalnum() or text[k] in "_.'!?"):
        return False  # the end of a longer name (`mul_add`, `h.add`)
    crossed = False
    while k >= 0 and text[k] in " \t\r\n":
        crossed = crossed or text[k] == "\n"
        k -= 1
    if k < 0:
        return False
    if text[k] in "(/":
        return True
    if crossed:
        line = text.rfind("\n", 0, k + 1)
        return "--" in text[line + 1 : k + 1]
    return False
