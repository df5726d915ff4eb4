"""Stand-in goal and declaration text: what the REPL shows of a parsed declaration.

Owns: hypotheses and goal text (`goal_text`, a `have`'s goal), a
declaration's `signature` and `axioms_of` it, the first constant a command
names, and the split of a `by` block into top-level tactics. Parsing itself
(commands, declarations, binders) is standin.syntax.
May import: standin.lexer, standin.syntax.
"""

from __future__ import annotations

import bisect

from .decls import Decl
from .lexer import CLOSE_BRACKETS, OPEN_BRACKETS, Positions, Tok, norm
from .syntax import Command


def hyps_lines(binders: list[tuple[str, str, str]]) -> list[str]:
    out: list[str] = []
    names: list[str] = []
    cur = None
    for name, ty, _ in binders:
        if not ty:
            continue
        if ty == cur:
            names.append(name)
            continue
        if names:
            out.append(" ".join(names) + " : " + cur)
        names = [name]
        cur = ty
    if names:
        out.append(" ".join(names) + " : " + cur)
    return out


def goal_text(hyps: list[tuple[str, str, str]], target: str) -> str:
    return "\n".join(hyps_lines(hyps) + ["⊢ " + target])


def signature(d: Decl, text: str) -> str:
    parts = [d.name]
    if d.binder_span:
        parts.append(
            norm(text[d.binder_span[0] : d.binder_span[1]]).replace(": ", " : ").replace("  ", " ")
        )
    sig = " ".join(parts)
    if d.type:
        sig += " : " + d.type
    return sig


def axioms_of(d: Decl, full_name: str | None = None, find=None) -> list[str]:
    if d.kw == "axiom":
        return [full_name or d.name]  # an axiom depends on itself
    out = [] if d.trivial else ["propext", "Classical.choice", "Quot.sound"]
    if d.sorry_toks or d.admit or d.errors:
        out.insert(1 if out else 0, "sorryAx")
    if d.native:
        out.insert(len(out) - 1 if "Quot.sound" in out else len(out), "Lean.ofReduceBool")
    if find is not None:
        # Like Lean's collectAxioms: a proof inherits the axioms of the
        # declarations it names (`foo.elim` names `foo`).
        for t in d.body:
            if t.kind != "id":
                continue
            parts = t.text.split(".")
            for k in range(len(parts), 0, -1):
                info = find(".".join(parts[:k]))
                if info is not None:
                    out.extend(a for a in info[1] if a not in out)
                    break
    return out


def first_constant(cmd: Command) -> str:
    seen_colon = False
    for t in cmd.toks[1:]:
        if t.text == ":":
            seen_colon = True
        elif seen_colon and t.kind == "id" and t.text[:1].isupper():
            return t.text
        elif seen_colon and t.kind == "num":
            return "OfNat.ofNat"
    return cmd.toks[0].text


def have_goal(d: Decl, s: Tok, text: str, hyps) -> str | None:
    body = d.body
    k = body.index(s)
    j = k - 1
    if j >= 0 and body[j].text == "by":
        j -= 1
    if j < 0 or body[j].text != ":=":
        return None
    # walk back to `have`/`show`/`suffices` on the same statement
    q = j - 1
    colon = None
    depth = 0
    while q >= 0:
        t = body[q].text
        if t in CLOSE_BRACKETS:
            depth += 1
        elif t in OPEN_BRACKETS:
            if depth == 0:
                return None
            depth -= 1
        elif depth == 0 and t == ":" and colon is None:
            colon = q
        elif depth == 0 and t in ("have", "haveI", "show", "suffices", "let"):
            break
        elif depth == 0 and t in (":=", "by"):
            return None
        q -= 1
    if q < 0 or colon is None or colon + 1 > j - 1:
        return None
    target = norm(text[body[colon + 1].start : body[j - 1].end])
    return goal_text(hyps, target)


def tactic_blocks(toks: list[Tok], pos: Positions) -> list[list[Tok]]:
    """Splits the tokens of a ``by`` block into top-level tactics."""
    if not toks:
        return []
    starts = pos.starts
    first_line = bisect.bisect_right(starts, toks[0].start) - 1
    col0 = toks[0].start - starts[first_line]
    out: list[list[Tok]] = [[]]
    prev_line = first_line
    depth = 0
    for t in toks:
        line = bisect.bisect_right(starts, t.start) - 1
        col = t.start - starts[line]
        new_line = line != prev_line
        prev_line = line
        if depth == 0 and out[-1]:
            if new_line and col == col0 and t.text not in ("<;>", "|"):
                out.append([])
            elif new_line and col < col0:
                break
        if t.text == ";" and depth == 0:
            out.append([])
            continue
        if t.text in OPEN_BRACKETS:
            depth += 1
        elif t.text in CLOSE_BRACKETS and depth > 0:
            depth -= 1
        out[-1].append(t)
    return [x for x in out if x]
