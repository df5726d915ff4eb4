"""Plausible mode: a rough, deterministic imitation of Lean's elaborator.

Used for every request that replay does not cover. Nothing here type-checks
anything; the goal is responses that are *shaped* exactly like the REPL's and
whose content is predictable from the source text:

* declarations (``theorem lemma example def instance abbrev opaque axiom
  structure class inductive``) are found at the start of a line; binders and
  the statement after the top-level ``:`` become the goal
  (``x y : Nat\\n⊢ x = y``), with ``variable`` binders from earlier commands
  of the same env chain in front;
* every ``sorry`` token gives a ``sorries`` entry (``have h : T := sorry``
  gives goal ``T``) and the declaration gets the ``declaration uses `sorry```
  warning at its name (at the keyword for ``example``/anonymous ``instance``);
  ``admit`` gives the warning only;
* **unknown identifiers**: an identifier right after ``exact``/``apply``, or
  inside the ``[...]`` list right after ``rw``/``rwa``/``rewrite``/``simp``/
  ``simp only``/``simp_all``/``dsimp``, that contains a ``.`` *and* contains
  ``nonexistent`` or ``unknown_`` is an error ``Unknown identifier `X```;
* ``#eval Lean.versionString`` answers ``"<lean-version> (leanrpc stand-in)"``;
  ``#eval`` of natural-number arithmetic or a string literal answers its value;
  ``#check NAME`` of a declaration seen in this env chain answers its signature;
* ``#print axioms NAME``: ``[propext, Classical.choice, Quot.sound]``, plus
  ``sorryAx`` when the proof has ``sorry``/``admit``/an error and
  ``Lean.ofReduceBool`` when it uses ``native_decide``; a proof made only of
  ``rfl``/``trivial``/``decide``/``native_decide``/``exact``/``intro``/
  local names and punctuation has no base axioms
  (``'NAME' does not depend on any axioms``);
* an ``import`` in a command with ``env`` is the ``invalid 'import' command``
  error; a header importing a module outside the known roots makes a *broken*
  env: every command elaborated on it (or on envs built from it) reports one
  error at its first token;
* ``allTactics``/``rootGoals``/``infotree``/``declarations`` are derived from
  the ``by`` blocks: one tactic per line at the block's column (or per ``;``),
  ``<;>`` lines continue the previous tactic.
"""

from __future__ import annotations

import bisect
import re

from ..core.leantext import block_comment_end

KNOWN_ROOTS = frozenset(
    ["Init", "Lean", "Std", "Mathlib", "Aesop", "Batteries", "Qq", "Plausible", "ProofWidgets", "LeanSearchClient"]
)

DECL_KWS = frozenset(
    ["theorem", "lemma", "example", "def", "instance", "abbrev", "opaque", "axiom", "structure", "class", "inductive"]
)
MODIFIERS = frozenset(["private", "protected", "noncomputable", "partial", "unsafe", "nonrec", "public", "meta"])
CMD_KWS = DECL_KWS | MODIFIERS | frozenset(
    [
        "#eval", "#check", "#print", "#reduce", "#exit", "#synth", "#help", "#lint", "#guard", "#guard_msgs",
        "open", "namespace", "section", "end", "variable", "universe", "set_option", "import", "attribute",
        "macro", "syntax", "notation", "infix", "infixl", "infixr", "prefix", "postfix", "macro_rules",
        "elab", "deriving", "mutual", "scoped", "local", "@[", "initialize", "export", "omit", "include",
    ]
)
_KIND_NAMES = {
    "theorem": "theorem", "lemma": "theorem", "example": "example", "def": "definition",
    "instance": "instance", "abbrev": "definition", "opaque": "opaque", "axiom": "axiom",
    "structure": "structure", "class": "class", "inductive": "inductive",
}
KNOWN_TACTICS = frozenset(
    """rfl simp simp_all simp? simp_all? dsimp simpa simpa? norm_num omega decide native_decide linarith
    nlinarith positivity ring ring_nf ring1 field_simp aesop aesop? tauto trivial exact exact? apply apply?
    refine refine' intro intros rintro cases rcases obtain induction constructor use exists existsi left right
    exfalso by_contra by_contra! by_cases contradiction assumption sorry admit have show suffices calc rw
    rewrite rwa erw nth_rewrite nth_rw unfold simp_rw push_neg norm_cast push_cast exact_mod_cast gcongr congr
    ext funext specialize subst generalize split split_ifs interval_cases fin_cases polyrith linear_combination
    abel group noncomm_ring zify qify lift set let clear rename_i revert symm trans conv change done skip first
    try repeat all_goals any_goals focus case case' next on_goal pick_goal swap rotate_left rotate_right
    iterate haveI letI infer_instance exacts apply_fun bound continuity measurability fun_prop norm_num1
    module compute_degree mono filter_upwards choose peel wlog nofun nomatch match fun_induction grind
    bv_decide hint assumption_mod_cast apply_assumption solve_by_elim delta injection contrapose contrapose!
    absurd trace dbg_trace guard_target guard_hyp observe decide! rel cancel_denoms induction' cases'
    subst_vars clear_value unfold_let exact! apply_rules positivity! nlinarith! linarith! field_simp!
    norm_num! simp_arith omega_nat replace obtain! refine_lift tfae_have tfae_finish intro! rename
    show_term dsimp! fail fail_if_success exists! constructorm casesm rcases? aesop_cat tauto! itauto
    decreasing_tactic simp_wf apply_mod_cast exact_mod_cast! classical""".split()
)
_CLOSERS = frozenset(
    """rfl simp simp_all simpa norm_num omega decide native_decide linarith nlinarith positivity ring ring1
    field_simp aesop tauto trivial exact exact? apply? assumption contradiction exacts polyrith
    linear_combination abel group noncomm_ring bound continuity measurability fun_prop norm_num1 module
    infer_instance nofun grind bv_decide simp_arith decide! exact_mod_cast assumption_mod_cast solve_by_elim
    itauto cancel_denoms simpa? rwa""".split()
)
_TRIVIAL_WORDS = frozenset(
    """by rfl trivial decide native_decide exact intro intros Eq.refl True.intro And.intro Or.inl Or.inr
    constructor fun λ assumption id le_refl Nat.le_refl _ show from""".split()
)
_REWRITE_LIKE = frozenset(["rw", "rwa", "rewrite", "simp", "simp_all", "dsimp", "simp?", "simpa", "erw", "nth_rw",
                           "nth_rewrite", "simp_rw"])
_OPEN = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "@[": "]"}
_CLOSE = frozenset(_OPEN.values())

_TOKEN = re.compile(
    r"""(?P<str>"(?:[^"\\]|\\.)*")"""
    r"""|(?P<char>'(?:\\[^']*|[^'\\])')"""
    r"""|(?P<id>(?:«[^»]*»|[^\W\d][\w'!?]*)(?:\.(?:«[^»]*»|[^\W\d][\w'!?]*))*)"""
    r"""|(?P<num>0x[0-9a-fA-F]+|\d+(?:\.\d+)?)"""
    r"""|(?P<sym>:=|<;>|<\|>|<\||\|>|=>|->|<->|<-|\.\.|::|@\[|\#[A-Za-z_]\w*|[^\s\w])""",
    re.S,
)
_WS = re.compile(r"\s+")


class Tok:
    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind, text, start, end):
        self.kind = kind
        self.text = text
        self.start = start
        self.end = end

    def __repr__(self):  # pragma: no cover - debugging aid
        return f"Tok({self.kind}, {self.text!r}, {self.start})"


def lex(text: str) -> list[Tok]:
    """Tokens of ``text``; comments and whitespace are dropped."""
    return list(iter_tokens(text))


def iter_tokens(text: str):
    prev = None
    i = 0
    n = len(text)
    match = _TOKEN.match
    ws = _WS.match
    while i < n:
        m = ws(text, i)
        if m:
            i = m.end()
            if i >= n:
                break
        c = text[i]
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "/" and text.startswith("/-", i):
            i = block_comment_end(text, i)
            continue
        m = match(text, i)
        if m is None:  # pragma: no cover - the sym branch matches any non-space
            i += 1
            continue
        kind = m.lastgroup
        if kind == "char" and prev is not None and prev.end == i and prev.kind == "id":
            # a quote glued to an identifier is never a char literal
            kind = "sym"
            end = i + 1
        else:
            end = m.end()
        prev = Tok(kind, text[i:end], i, end)
        yield prev
        i = end


class Positions:
    """Offset -> (line, column) with 1-based lines and code-point columns."""

    __slots__ = ("starts",)

    def __init__(self, text: str):
        starts = [0]
        find = text.find
        j = find("\n")
        while j >= 0:
            starts.append(j + 1)
            j = find("\n", j + 1)
        self.starts = starts

    def line_col(self, off: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, off) - 1
        return k + 1, off - self.starts[k]

    def pos(self, off: int) -> dict:
        line, col = self.line_col(off)
        return {"line": line, "column": col}


def norm(s: str) -> str:
    return _WS.sub(" ", s).strip()


def message(severity: str, pos: dict, end: dict | None, data: str) -> dict:
    return {"severity": severity, "pos": pos, "endPos": end, "data": data}


# --------------------------------------------------------------------------
# headers


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


# --------------------------------------------------------------------------
# commands and declarations


class Decl:
    __slots__ = (
        "kw", "name", "name_tok", "kw_tok", "binders", "type", "type_span", "body", "toks", "start", "end",
        "sorry_toks", "admit", "native", "errors", "trivial", "by_tok", "binder_span", "value_span", "mods",
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
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE and depth > 0:
            depth -= 1
    if cur:
        cmds.append(_mk_cmd(cur))
    return cmds


def _modifier_run(cur: list[Tok]) -> bool:
    # `@[simp]` / `private` on their own line belong to the next declaration.
    depth = 0
    for t in cur:
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE:
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
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE:
            depth -= 1
        elif depth == 0 and t.text not in MODIFIERS:
            # `open X in theorem ...`: the command is the part after `in`
            break
        k += 1
    kw = toks[k].text if k < len(toks) else toks[0].text
    if kw in ("open", "set_option"):
        for j in range(k, len(toks)):
            if toks[j].text == "in" and j + 1 < len(toks):
                sub = _mk_cmd(toks[j + 1:])
                sub.toks = toks
                sub.start = c.start
                return sub
    c.kw = kw
    return c


def _match(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing toks[i] (or the last index)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in _OPEN:
            depth += 1
        elif t in _CLOSE:
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
            k = _match(toks, k) + 1
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
    if d.kw != "example" and k < n and toks[k].kind == "id" and toks[k].text not in ("where", "extends"):
        d.name_tok = toks[k]
        d.name = toks[k].text.replace("«", "").replace("»", "")
        k += 1
    binders: list[tuple[str, str, str]] = []  # (name, type, binder kind)
    bstart = toks[k].start if k < n else d.end
    bend = bstart
    while k < n and (toks[k].text in ("(", "{", "[", "⦃") or (toks[k].kind == "id" and toks[k].text != "where")):
        if toks[k].kind == "id":
            binders.append((toks[k].text, "", "default"))
            bend = toks[k].end
            k += 1
            continue
        j = _match(toks, k)
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
            if t in _OPEN:
                depth += 1
            elif t in _CLOSE:
                depth -= 1
            elif depth == 0 and t in (":=", "where", "|"):
                break
            j += 1
        if j > k + 1:
            d.type_span = (toks[k + 1].start, toks[j - 1].end)
            d.type = norm(text[d.type_span[0]:d.type_span[1]])
        k = j
    d.body = toks[k + 1:] if k < n and toks[k].text == ":=" else toks[k:]
    d.value_span = (toks[k].start, d.end) if k < n else None
    d.by_tok = d.body[0] if d.body and d.body[0].text == "by" and k < n and toks[k].text == ":=" else None
    d.sorry_toks = [t for t in d.body if t.text == "sorry" and t.kind == "id"]
    d.admit = any(t.text == "admit" and t.kind == "id" for t in d.body)
    d.native = any(t.text == "native_decide" for t in d.body)
    d.errors = _unknown_identifiers(d.body)
    bound = {b[0] for b in binders}
    d.trivial = all(
        t.kind in ("sym", "num", "str", "char") or t.text in _TRIVIAL_WORDS or t.text in bound or "." not in t.text
        and t.text[:1].islower() and len(t.text) <= 3
        for t in d.body
    )
    return d


def _binder_group(toks: list[Tok], i: int, j: int, text: str) -> list[tuple[str, str, str]]:
    opener = toks[i].text
    kind = {"(": "default", "{": "implicit", "[": "instImplicit", "⦃": "strictImplicit"}.get(opener, "default")
    inner = toks[i + 1:j]
    depth = 0
    for c, t in enumerate(inner):
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE:
            depth -= 1
        elif depth == 0 and t.text == ":":
            names = [x.text for x in inner[:c] if x.kind == "id"]
            rest = inner[c + 1:]
            stop = len(rest)
            for q, x in enumerate(rest):
                if x.text == ":=":
                    stop = q
                    break
            ty = norm(text[rest[0].start:rest[stop - 1].end]) if stop else ""
            return [(nm, ty, kind) for nm in names]
    if opener == "[" and inner:
        return [("inst✝", norm(text[inner[0].start:inner[-1].end]), kind)]
    return [(x.text, "", kind) for x in inner if x.kind == "id"]


def _unknown_identifiers(body: list[Tok]) -> list[Tok]:
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
                end = _match(body, j)
                bad.extend(x for x in body[j + 1:end] if _is_unknown(x))
    return bad


def _is_unknown(t: Tok) -> bool:
    s = t.text
    return t.kind == "id" and "." in s and ("nonexistent" in s or "unknown_" in s)


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


# --------------------------------------------------------------------------
# env facts (what later commands can see)


class Facts:
    """Declarations and `variable` binders introduced by one command text."""

    __slots__ = ("decls", "variables")

    def __init__(self):
        self.decls: dict[str, tuple] = {}
        self.variables: list[tuple[str, str, str]] = []


def facts_of(text: str) -> Facts:
    f = Facts()
    if not text:
        return f
    toks = lex(text)
    pos = Positions(text)
    ns: list[str] = []
    for cmd in split_commands(toks, text, pos):
        _note_namespace(cmd, ns)
        if cmd.kw == "variable":
            f.variables.extend(_variable_binders(cmd, text))
        elif cmd.kw in DECL_KWS:
            d = parse_decl(cmd, text)
            if d is not None and d.name:
                full = ".".join(ns + [d.name])
                info = (_signature(d, text), _axioms(d, full, f.decls.get))
                f.decls[full] = info
                f.decls.setdefault(d.name, info)
    return f


def _note_namespace(cmd: Command, ns: list[str]) -> None:
    if cmd.kw == "namespace" and len(cmd.toks) > 1:
        ns.extend(cmd.toks[1].text.split("."))
    elif cmd.kw == "end" and len(cmd.toks) > 1 and ns:
        for _ in cmd.toks[1].text.split("."):
            if ns:
                ns.pop()


def _variable_binders(cmd: Command, text: str) -> list[tuple[str, str, str]]:
    toks = cmd.toks
    out = []
    k = 1
    while k < len(toks):
        if toks[k].text in _OPEN:
            j = _match(toks, k)
            out.extend(_binder_group(toks, k, j, text))
            k = j + 1
        else:
            k += 1
    return out


def _signature(d: Decl, text: str) -> str:
    parts = [d.name]
    if d.binder_span:
        parts.append(norm(text[d.binder_span[0]:d.binder_span[1]]).replace(": ", " : ").replace("  ", " "))
    sig = " ".join(parts)
    if d.type:
        sig += " : " + d.type
    return sig


def _axioms(d: Decl, full_name: str | None = None, find=None) -> list[str]:
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


# --------------------------------------------------------------------------
# elaborating a command


class Elab:
    """Everything a command response needs, before ids are handed out."""

    __slots__ = ("messages", "sorries", "root_goals", "tactics", "infotree", "declarations", "facts")

    def __init__(self):
        self.messages: list[dict] = []
        self.sorries: list[tuple[dict, list[str]]] = []  # (entry without proofState, goals)
        self.root_goals: list[tuple[dict, list[str]]] = []
        self.tactics: list[tuple[dict, list[str]]] = []
        self.infotree: list | None = None
        self.declarations: list | None = None


# `#check` of core types the stand-in knows without a declaration (Lean prints these).
BUILTIN_SIGNATURES = {
    "Nat": "Nat : Type", "Int": "Int : Type", "String": "String : Type", "Bool": "Bool : Type",
    "Prop": "Prop : Type", "True": "True : Prop", "False": "False : Prop",
}


def elaborate(
    text: str,
    *,
    lookup,
    variables: list,
    broken: bool,
    body_start: int,
    lean_version: str,
    sorry_style: str,
    all_tactics: bool = False,
    root_goals: bool = False,
    infotree: str | None = None,
    declarations: bool = False,
) -> Elab:
    """Elaborates ``text[body_start:]`` plausibly.

    ``lookup(name)`` returns ``(signature, axioms)`` for declarations of the
    env chain, or None.
    """
    out = Elab()
    toks = lex(text)
    if body_start:
        toks = [t for t in toks if t.start >= body_start]
    pos = Positions(text)
    P = pos.pos
    msgs = out.messages
    sorry_word = "declaration uses `sorry`" if sorry_style != "quote" else "declaration uses 'sorry'"
    cmds = split_commands(toks, text, pos) if toks else []
    local: dict[str, tuple] = {}
    variables = list(variables)
    ns: list[str] = []
    tree: list = []
    tactic_nodes: list = []
    decl_entries: list = []

    def find(name):
        return local.get(name) or lookup(name)

    for cmd in cmds:
        first = cmd.toks[0]
        kw = cmd.kw
        if broken:
            if kw == "open" and len(cmd.toks) > 1:
                data = f"unknown namespace '{cmd.toks[1].text}'"
            else:
                data = f"unknown constant '{_first_constant(cmd)}'"
            msgs.append(message("error", P(first.start), P(first.end), data))
            continue
        _note_namespace(cmd, ns)
        cmd_children: list = []
        if kw == "import":
            msgs.append(
                message(
                    "error", P(first.start), P(first.end),
                    "invalid 'import' command, it must be used in the beginning of the file",
                )
            )
        elif kw not in CMD_KWS:
            what = "identifier" if first.kind == "id" else f"token '{first.text}'"
            msgs.append(message("error", P(first.start), P(first.end), f"unexpected {what}; expected command"))
        elif kw == "variable":
            variables.extend(_variable_binders(cmd, text))
        elif kw == "#eval":
            _eval(cmd, text, P, msgs, lean_version)
        elif kw == "#check":
            if len(cmd.toks) > 1 and cmd.toks[1].kind == "id":
                name = cmd.toks[1].text
                info = find(name)
                signature = info[0] if info is not None else BUILTIN_SIGNATURES.get(name)
                if signature is not None:
                    msgs.append(message("info", P(first.start), P(first.end), signature))
        elif kw == "#print":
            if len(cmd.toks) > 2 and cmd.toks[1].text == "axioms":
                name = cmd.toks[2].text
                info = find(name)
                if info is None:
                    msgs.append(message("error", P(cmd.toks[2].start), P(cmd.toks[2].end),
                                        f"Unknown constant `{name}`"))
                elif info[1]:
                    msgs.append(message("info", P(first.start), P(first.end),
                                        f"'{name}' depends on axioms: [{', '.join(info[1])}]"))
                else:
                    msgs.append(message("info", P(first.start), P(first.end),
                                        f"'{name}' does not depend on any axioms"))
        elif kw in DECL_KWS:
            d = parse_decl(cmd, text)
            if d is not None:
                hyps = variables + [b for b in d.binders if b[1]]
                goal = goal_text(hyps, d.type) if d.type else None
                for e in d.errors:
                    msgs.append(message("error", P(e.start), P(e.end), f"Unknown identifier `{e.text}`"))
                for s in d.sorry_toks:
                    g = _have_goal(d, s, text, hyps) or goal
                    if g is None:
                        continue
                    out.sorries.append(({"pos": P(s.start), "goal": g, "endPos": P(s.end)}, [g]))
                if d.sorry_toks or d.admit:
                    at = d.name_tok or d.kw_tok
                    msgs.append(message("warning", P(at.start), P(at.end), sorry_word))
                if d.by_tok is not None and goal is not None:
                    b = d.by_tok
                    if root_goals:
                        out.root_goals.append(({"pos": P(b.start), "goal": goal, "endPos": P(b.start)}, [goal]))
                    for tt in tactic_blocks(d.body[1:], pos):
                        ttext = text[tt[0].start:tt[-1].end]
                        used = sorted({t.text for t in tt if t.kind == "id" and "." in t.text})
                        if all_tactics:
                            out.tactics.append((
                                {"usedConstants": used, "tactic": ttext, "pos": P(tt[0].start), "goals": goal,
                                 "endPos": P(tt[-1].end)},
                                [goal],
                            ))
                        node = _tactic_node(tt, ttext, P, goal)
                        cmd_children.append(node)
                        tactic_nodes.append(node)
                if d.name:
                    full = ".".join(ns + [d.name])
                    local[full] = local[d.name] = (_signature(d, text), _axioms(d, full, find))
                if declarations:
                    decl_entries.append(_declaration(d, text, P, ns))
        if infotree == "full":
            tree.append(_command_node(cmd, text, P, cmd_children))
    if infotree == "full":
        end = P(len(text))
        tree.append({
            "kind": "CommandInfo",
            "node": {"stx": _stx(end, end, "", "Lean.Parser.Command.eoi", ["«»"]),
                     "elaborator": "Lean.Elab.Command.elabEoi"},
            "children": [],
        })
        out.infotree = tree
    elif infotree in ("tactics", "original", "substantive"):
        out.infotree = tactic_nodes or None
    if declarations:
        out.declarations = decl_entries
    return out


def _first_constant(cmd: Command) -> str:
    seen_colon = False
    for t in cmd.toks[1:]:
        if t.text == ":":
            seen_colon = True
        elif seen_colon and t.kind == "id" and t.text[:1].isupper():
            return t.text
        elif seen_colon and t.kind == "num":
            return "OfNat.ofNat"
    return cmd.toks[0].text


def _have_goal(d: Decl, s: Tok, text: str, hyps) -> str | None:
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
        if t in _CLOSE:
            depth += 1
        elif t in _OPEN:
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
    target = norm(text[body[colon + 1].start:body[j - 1].end])
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
            if new_line and col == col0 and t.text != "<;>":
                out.append([])
            elif new_line and col < col0:
                break
        if t.text == ";" and depth == 0:
            out.append([])
            continue
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE and depth > 0:
            depth -= 1
        out[-1].append(t)
    return [x for x in out if x]


def _stx(start: dict, finish: dict, pp, kind: str, arg_kinds: list) -> dict:
    return {
        "range": {"synthetic": False, "start": start, "finish": finish},
        "pp": pp,
        "kind": kind,
        "argKinds": arg_kinds,
    }


def _tactic_kind(word: str) -> str:
    return {"rfl": "Lean.Parser.Tactic.tacticRfl", "sorry": "Lean.Parser.Tactic.tacticSorry"}.get(
        word, "Lean.Parser.Tactic." + re.sub(r"\W", "", word)
    )


def _tactic_node(tt: list[Tok], ttext: str, P, goal: str) -> dict:
    kind = _tactic_kind(tt[0].text)
    return {
        "kind": "TacticInfo",
        "node": {
            "stx": _stx(P(tt[0].start), P(tt[-1].end), ttext, kind, [tt[0].text]),
            "name": kind,
            "goalsBefore": [goal],
            "goalsAfter": [],
        },
        "children": [],
    }


_CMD_KIND = {
    "#eval": ("Lean.Parser.Command.eval", "Lean.Elab.Command.elabEvalCoreUnsafe"),
    "#check": ("Lean.Parser.Command.check", "Lean.Elab.Command.elabCheck"),
    "#print": ("Lean.Parser.Command.print", "Lean.Elab.Command.elabPrint"),
    "open": ("Lean.Parser.Command.open", "Lean.Elab.Command.elabOpen"),
    "variable": ("Lean.Parser.Command.variable", "Lean.Elab.Command.elabVariable"),
    "set_option": ("Lean.Parser.Command.set_option", "Lean.Elab.Command.elabSetOption"),
    "namespace": ("Lean.Parser.Command.namespace", "Lean.Elab.Command.elabNamespace"),
    "section": ("Lean.Parser.Command.section", "Lean.Elab.Command.elabSection"),
    "end": ("Lean.Parser.Command.end", "Lean.Elab.Command.elabEnd"),
}


def _command_node(cmd: Command, text: str, P, children: list) -> dict:
    kind, elab = _CMD_KIND.get(cmd.kw, ("Lean.Parser.Command.declaration", "Lean.Elab.Command.elabDeclaration"))
    return {
        "kind": "CommandInfo",
        "node": {"stx": _stx(P(cmd.start), P(cmd.end), text[cmd.start:cmd.end], kind, [cmd.kw]), "elaborator": elab},
        "children": children,
    }


def _declaration(d: Decl, text: str, P, ns: list[str]) -> dict:
    def piece(span):
        if span is None:
            return None
        return {
            "range": {"synthetic": False, "start": P(span[0]), "finish": P(span[1])},
            "pp": text[span[0]:span[1]],
            "constants": [],
        }

    sig_span = None
    if d.binder_span or d.type_span:
        a = (d.binder_span or d.type_span)[0]
        b = (d.type_span or d.binder_span)[1]
        sig_span = (a, b)
    binders = None
    if d.binder_span:
        binders = {
            "range": {"synthetic": False, "start": P(d.binder_span[0]), "finish": P(d.binder_span[1])},
            "pp": text[d.binder_span[0]:d.binder_span[1]],
            "map": [{"type": ty, "id": nm if nm != "inst✝" else "", "binderInfo": bk} for nm, ty, bk in d.binders],
            "groups": [],
        }
    name = d.name or "_example"
    return {
        "value": piece(d.value_span),
        "type": piece(d.type_span),
        "signature": piece(sig_span),
        "scope": {
            "varDecls": [], "openDecl": [], "omitVars": [], "levelNames": [], "includeVars": [],
            "currNamespace": ".".join(ns) if ns else "[anonymous]",
        },
        "range": {"synthetic": False, "start": P(d.start), "finish": P(d.end)},
        "pp": text[d.start:d.end],
        "name": name,
        "modifiers": {
            "visibility": "private" if "private" in d.mods else ("protected" if "protected" in d.mods else "regular"),
            "recKind": "partial" if "partial" in d.mods else ("nonrec" if "nonrec" in d.mods else "default"),
            "isUnsafe": "unsafe" in d.mods,
            "isProtected": "protected" in d.mods,
            "docString": None,
            "computeKind": "noncomputable" if "noncomputable" in d.mods else "regular",
            "attributes": [],
        },
        "kind": _KIND_NAMES.get(d.kw, d.kw),
        "fullName": ".".join(ns + [name]),
        "binders": binders,
    }


# -- #eval


def _eval(cmd: Command, text: str, P, msgs: list, lean_version: str) -> None:
    first = cmd.toks[0]
    expr = norm(text[cmd.toks[1].start:cmd.end]) if len(cmd.toks) > 1 else ""
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


# --------------------------------------------------------------------------
# tactic mode


class TacticResult:
    __slots__ = ("error", "messages", "nested", "goals", "sorry")

    def __init__(self):
        self.error: str | None = None
        self.messages: list[dict] = []
        self.nested: list[str] = []  # goals of nested sorries, in order
        self.goals: list[str] = []
        self.sorry = False


def status(goals: list[str], sorry: bool) -> str:
    if goals:
        return "Incomplete: open goals remain"
    if sorry:
        return "Incomplete: contains sorry"
    return "Completed"


_ZERO = {"line": 0, "column": 0}


def run_tactic(tactic: str, goals: list[str], sorry: bool) -> TacticResult:
    r = TacticResult()
    r.sorry = sorry
    toks = lex(tactic)
    if not toks:
        r.error = "Lean error:\n<input>:1:0: unexpected end of input"
        return r
    head = toks[0].text
    if head not in KNOWN_TACTICS and head not in ("·", ".", "(", "{", "case", "next"):
        r.error = "Lean error:\n<input>:1:1: unknown tactic"
        return r
    if not goals:
        r.error = "Lean error:\nno goals to be proved"
        return r
    main, rest = goals[0], goals[1:]
    bad = _unknown_identifiers(toks)
    if bad:
        for t in bad:
            r.messages.append(message("error", _ZERO, _ZERO, f"Unknown identifier `{t.text}`"))
        r.sorry = True
        r.goals = rest
        return r
    words = {t.text for t in toks if t.kind == "id"}
    if head in ("have", "haveI") and len(toks) > 1:
        _tactic_have(tactic, toks, main, rest, r)
        return r
    if head in ("sorry", "admit"):
        r.nested.append(main)
        r.sorry = True
        r.goals = rest
        return r
    if head == "all_goals" and "sorry" in words:
        r.nested.extend(goals)
        r.sorry = True
        r.goals = []
        return r
    if "sorry" in words or "admit" in words:
        r.nested.append(main)
        r.sorry = True
        r.goals = rest
        return r
    if head in ("intro", "intros", "rintro"):
        names = [t.text for t in toks[1:] if t.kind == "id"] or ["a✝"]
        r.goals = [_intro(main, names)] + rest
        return r
    if head in _CLOSERS:
        r.goals = rest
        return r
    r.goals = goals
    return r


def _tactic_have(tactic: str, toks: list[Tok], main: str, rest: list[str], r: TacticResult) -> None:
    name = toks[1].text if toks[1].kind == "id" else "this"
    colon = next((k for k, t in enumerate(toks) if t.text == ":"), None)
    assign = next((k for k, t in enumerate(toks) if t.text == ":="), None)
    hyps, target = _split_goal(main)
    if colon is None:
        ty = "?"
    else:
        end = toks[(assign if assign is not None else len(toks)) - 1].end
        ty = norm(tactic[toks[colon + 1].start:end]) if colon + 1 < len(toks) else "?"
    with_h = "\n".join(hyps + [f"{name} : {ty}", "⊢ " + target])
    if assign is None:
        r.goals = ["\n".join(hyps + ["⊢ " + ty]), with_h] + rest
        return
    value = {t.text for t in toks[assign + 1:]}
    if "sorry" in value or "admit" in value:
        r.nested.append("\n".join(hyps + ["⊢ " + ty]))
        r.sorry = True
    r.goals = [with_h] + rest


def _split_goal(goal: str) -> tuple[list[str], str]:
    lines = goal.split("\n")
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith("⊢ "):
            return lines[:k], "\n".join(lines[k:])[2:]
    return lines, ""


def _intro(goal: str, names: list[str]) -> str:
    hyps, target = _split_goal(goal)
    for nm in names:
        t = target.strip()
        m = re.match(r"^∀\s*\(?\s*([^\s:,()]+)\s*:\s*([^,]+?)\)?\s*,\s*(.*)$", t, re.S)
        if m:
            hyps.append(f"{nm} : {m.group(2).strip()}")
            target = m.group(3).replace(m.group(1), nm) if m.group(1) != nm else m.group(3)
            continue
        depth = 0
        split = None
        for k, c in enumerate(t):
            if c in "([{⟨":
                depth += 1
            elif c in ")]}⟩":
                depth -= 1
            elif c == "→" and depth == 0:
                split = k
                break
        if split is None:
            break
        hyps.append(f"{nm} : {t[:split].strip()}")
        target = t[split + 1:].strip()
    return "\n".join(hyps + ["⊢ " + target])
