"""Stand-in parser: headers, commands, declarations and what an env knows.

Owns: `split_header`, splitting a text into commands at column-0 keywords,
`parse_decl` (binders, statement, body, sorries, unknown identifiers),
namespaces and `variable` binders (goal, signature and tactic-block text is
standin.goals; what a command adds to its env is standin.statements).
May import: standin.lexer.
"""

from __future__ import annotations

import bisect

from .lexer import CLOSE_BRACKETS, OPEN_BRACKETS, Positions, Tok, iter_tokens, norm

KNOWN_ROOTS = frozenset(
    [
        "Init",
        "Lean",
        "Std",
        "Mathlib",
        "Aesop",
        "Batteries",
        "Qq",
        "Plausible",
        "ProofWidgets",
        "LeanSearchClient",
    ]
)

DECL_KWS = frozenset(
    [
        "theorem",
        "lemma",
        "example",
        "def",
        "instance",
        "abbrev",
        "opaque",
        "axiom",
        "structure",
        "class",
        "inductive",
    ]
)
MODIFIERS = frozenset(
    ["private", "protected", "noncomputable", "partial", "unsafe", "nonrec", "public", "meta"]
)
CMD_KWS = (
    DECL_KWS
    | MODIFIERS
    | frozenset(
        [
            "#eval",
            "#check",
            "#print",
            "#reduce",
            "#exit",
            "#synth",
            "#help",
            "#lint",
            "#guard",
            "#guard_msgs",
            "open",
            "namespace",
            "section",
            "end",
            "variable",
            "universe",
            "set_option",
            "import",
            "attribute",
            "macro",
            "syntax",
            "notation",
            "infix",
            "infixl",
            "infixr",
            "prefix",
            "postfix",
            "macro_rules",
            "elab",
            "deriving",
            "mutual",
            "scoped",
            "local",
            "@[",
            "initialize",
            "export",
            "omit",
            "include",
        ]
    )
)
KIND_NAMES = {
    "theorem": "theorem",
    "lemma": "theorem",
    "example": "example",
    "def": "definition",
    "instance": "instance",
    "abbrev": "definition",
    "opaque": "opaque",
    "axiom": "axiom",
    "structure": "structure",
    "class": "class",
    "inductive": "inductive",
}
_TRIVIAL_WORDS = frozenset(
    """by rfl trivial decide native_decide exact intro intros Eq.refl True.intro And.intro Or.inl Or.inr
    constructor fun λ assumption id le_refl Nat.le_refl _ show from""".split()
)
_REWRITE_LIKE = frozenset(
    [
        "rw",
        "rwa",
        "rewrite",
        "simp",
        "simp_all",
        "dsimp",
        "simp?",
        "simpa",
        "erw",
        "nth_rw",
        "nth_rewrite",
        "simp_rw",
    ]
)


def split_header(text: str) -> tuple[list[str], int]:
    """Returns (imported modules, offset where the body starts)."""
    mods: list[str] = []
    body = 0
    it = iter_tokens(text)
    pending = None
    for t in it:
        if pending == "import":
            if t.kind == "id":
                mods.append(t.text)
                body = t.end
                pending = None
                continue
            break
        if t.text == "import":
            pending = "import"
            body = t.end
        elif t.text == "prelude" and not mods:
            body = t.end
        elif t.text in ("public", "meta", "private"):
            continue
        else:
            break
    return mods, body


def module_known(mod: str) -> bool:
    return mod.split(".", 1)[0] in KNOWN_ROOTS


def is_mathlib(mod: str) -> bool:
    return mod == "Mathlib" or mod.startswith("Mathlib.")


class Decl:
    __slots__ = (
        "kw",
        "name",
        "name_tok",
        "kw_tok",
        "binders",
        "type",
        "type_span",
        "body",
        "toks",
        "start",
        "end",
        "sorry_toks",
        "admit",
        "native",
        "errors",
        "trivial",
        "by_tok",
        "binder_span",
        "value_span",
        "mods",
    )


class Command:
    __slots__ = ("toks", "kw", "start", "end", "decl")


def split_commands(toks: list[Tok], text: str, pos: Positions) -> list[Command]:
    cmds: list[Command] = []
    cur: list[Tok] = []
    starts = pos.starts
    prev_line = -1
    depth = 0
    for t in toks:
        line = bisect.bisect_right(starts, t.start) - 1
        first_on_line = line != prev_line
        prev_line = line
        if (
            depth == 0
            and cur
            and first_on_line
            and t.start == starts[line]
            and t.text in CMD_KWS
            and not (cur[-1].text == "in")
            and not _modifier_run(cur)
        ):
            cmds.append(_mk_cmd(cur))
            cur = []
        cur.append(t)
        if t.text in OPEN_BRACKETS:
            depth += 1
        elif t.text in CLOSE_BRACKETS and depth > 0:
            depth -= 1
    if cur:
        cmds.append(_mk_cmd(cur))
    return cmds


def _modifier_run(cur: list[Tok]) -> bool:
    # `@[simp]` / `private` on their own line belong to the next declaration.
    depth = 0
    for t in cur:
        if t.text in OPEN_BRACKETS:
            depth += 1
        elif t.text in CLOSE_BRACKETS:
            depth -= 1
        elif depth == 0 and t.text not in MODIFIERS:
            return False
    return True


def _mk_cmd(toks: list[Tok]) -> Command:
    c = Command()
    c.toks = toks
    c.start = toks[0].start
    c.end = toks[-1].end
    c.decl = None
    k = 0
    depth = 0
    while k < len(toks):
        t = toks[k]
        if t.text in OPEN_BRACKETS:
            depth += 1
        elif t.text in CLOSE_BRACKETS:
            depth -= 1
        elif depth == 0 and t.text not in MODIFIERS:
            # `open X in theorem ...`: the command is the part after `in`
            break
        k += 1
    kw = toks[k].text if k < len(toks) else toks[0].text
    if kw in ("open", "set_option", "omit", "include"):  # `omit [inst] in lemma ...` too
        for j in range(k, len(toks)):
            if toks[j].text == "in" and j + 1 < len(toks):
                sub = _mk_cmd(toks[j + 1 :])
                sub.toks = toks
                sub.start = c.start
                return sub
    c.kw = kw
    return c


def matching_bracket(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing toks[i] (or the last index)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in OPEN_BRACKETS:
            depth += 1
        elif t in CLOSE_BRACKETS:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def parse_decl(cmd: Command, text: str) -> Decl | None:
    toks = cmd.toks
    n = len(toks)
    k = 0
    mods = []
    while k < n and (toks[k].text in MODIFIERS or toks[k].text == "@["):
        if toks[k].text == "@[":
            k = matching_bracket(toks, k) + 1
        else:
            mods.append(toks[k].text)
            k += 1
    while k < n and toks[k].text not in DECL_KWS:
        k += 1
    if k >= n:
        return None
    d = Decl()
    d.mods = mods
    d.kw_tok = toks[k]
    d.kw = toks[k].text
    d.toks = toks
    d.start = cmd.start
    d.end = cmd.end
    k += 1
    d.name = None
    d.name_tok = None
    if (
        d.kw != "example"
        and k < n
        and toks[k].kind == "id"
        and toks[k].text not in ("where", "extends")
    ):
        d.name_tok = toks[k]
        d.name = toks[k].text.replace("«", "").replace("»", "")
        k += 1
    binders: list[tuple[str, str, str]] = []  # (name, type, binder kind)
    bstart = toks[k].start if k < n else d.end
    bend = bstart
    while k < n and (
        toks[k].text in ("(", "{", "[", "⦃") or (toks[k].kind == "id" and toks[k].text != "where")
    ):
        if toks[k].kind == "id":
            binders.append((toks[k].text, "", "default"))
            bend = toks[k].end
            k += 1
            continue
        j = matching_bracket(toks, k)
        binders.extend(_binder_group(toks, k, j, text))
        bend = toks[j].end
        k = j + 1
    d.binders = binders
    d.binder_span = (bstart, bend) if binders else None
    d.type = None
    d.type_span = None
    if k < n and toks[k].text == ":":
        j = k + 1
        depth = 0
        while j < n:
            t = toks[j].text
            if t in OPEN_BRACKETS:
                depth += 1
            elif t in CLOSE_BRACKETS:
                depth -= 1
            elif depth == 0 and t in (":=", "where", "|"):
                break
            j += 1
        if j > k + 1:
            d.type_span = (toks[k + 1].start, toks[j - 1].end)
            d.type = norm(text[d.type_span[0] : d.type_span[1]])
        k = j
    d.body = toks[k + 1 :] if k < n and toks[k].text == ":=" else toks[k:]
    d.value_span = (toks[k].start, d.end) if k < n else None
    d.by_tok = (
        d.body[0] if d.body and d.body[0].text == "by" and k < n and toks[k].text == ":=" else None
    )
    d.sorry_toks = [t for t in d.body if t.text == "sorry" and t.kind == "id"]
    d.admit = any(t.text == "admit" and t.kind == "id" for t in d.body)
    d.native = any(t.text == "native_decide" for t in d.body)
    d.errors = unknown_identifiers(d.body)
    bound = {b[0] for b in binders}
    d.trivial = all(
        t.kind in ("sym", "num", "str", "char")
        or t.text in _TRIVIAL_WORDS
        or t.text in bound
        or "." not in t.text
        and t.text[:1].islower()
        and len(t.text) <= 3
        for t in d.body
    )
    return d


def _binder_group(toks: list[Tok], i: int, j: int, text: str) -> list[tuple[str, str, str]]:
    opener = toks[i].text
    kind = {"(": "default", "{": "implicit", "[": "instImplicit", "⦃": "strictImplicit"}.get(
        opener, "default"
    )
    inner = toks[i + 1 : j]
    depth = 0
    for c, t in enumerate(inner):
        if t.text in OPEN_BRACKETS:
            depth += 1
        elif t.text in CLOSE_BRACKETS:
            depth -= 1
        elif depth == 0 and t.text == ":":
            names = [x.text for x in inner[:c] if x.kind == "id"]
            rest = inner[c + 1 :]
            stop = len(rest)
            for q, x in enumerate(rest):
                if x.text == ":=":
                    stop = q
                    break
            ty = norm(text[rest[0].start : rest[stop - 1].end]) if stop else ""
            return [(nm, ty, kind) for nm in names]
    if opener == "[" and inner:
        return [("inst✝", norm(text[inner[0].start : inner[-1].end]), kind)]
    return [(x.text, "", kind) for x in inner if x.kind == "id"]


def unknown_identifiers(body: list[Tok]) -> list[Tok]:
    bad: list[Tok] = []
    n = len(body)
    for k, t in enumerate(body):
        if t.text in ("exact", "apply") and k + 1 < n:
            if _is_unknown(body[k + 1]):
                bad.append(body[k + 1])
        elif t.text in _REWRITE_LIKE:
            j = k + 1
            if j < n and body[j].text == "only":
                j += 1
            if j < n and body[j].text == "[":
                end = matching_bracket(body, j)
                bad.extend(x for x in body[j + 1 : end] if _is_unknown(x))
    return bad


def _is_unknown(t: Tok) -> bool:
    s = t.text
    return t.kind == "id" and "." in s and ("nonexistent" in s or "unknown_" in s)


def note_namespace(cmd: Command, ns: list[str]) -> None:
    if cmd.kw == "namespace" and len(cmd.toks) > 1:
        ns.extend(cmd.toks[1].text.split("."))
    elif cmd.kw == "end" and len(cmd.toks) > 1 and ns:
        for _ in cmd.toks[1].text.split("."):
            if ns:
                ns.pop()


def variable_binders(cmd: Command, text: str) -> list[tuple[str, str, str]]:
    toks = cmd.toks
    out = []
    k = 1
    while k < len(toks):
        if toks[k].text in OPEN_BRACKETS:
            j = matching_bracket(toks, k)
            out.extend(_binder_group(toks, k, j, text))
            k = j + 1
        else:
            k += 1
    return out
