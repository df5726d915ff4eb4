"""Stand-in declarations: what one declaration command says (its binders, statement, body, sorries).

Owns: `Decl` and `parse_decl` (modifiers, keyword, name, binders, type and
value spans, sorries and `admit`, `native_decide`, a trivially-true body),
`variable` binders, and the unknown-identifier rule (`exact`/`apply`/`rw [...]`
naming a `nonexistent`/`unknown_` constant). Split from syntax.py (headers,
command boundaries, namespaces): this room reads inside one command only.
May import: standin.lexer, standin.syntax.
"""

from __future__ import annotations

from .lexer import CLOSE_BRACKETS, OPEN_BRACKETS, Tok, norm
from .syntax import DECL_KWS, MODIFIERS, Command, matching_bracket

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
