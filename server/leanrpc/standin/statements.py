"""What an env knows about its declarations, and how the stand-in prints them.

Owns: `Facts`/`facts_of` (the declarations and `variable` binders one command
text adds to its env), `decl_info` (one declaration's entry: signature,
axioms, kind, statement rendering, body) and the answers to the statement
queries a reference check sends (leanrpc.reference):
``set_option pp.all true in #check @NAME`` and ``#print NAME``.

The stand-in has no elaborator, so its "elaborated statement" is a
deterministic rendering, not Lean's pp.all output: the binders and type as
tokens joined by single spaces (so spacing and comments do not matter, while
any change of statement or hypotheses does), followed, when the text
declared any ``instance``, ``notation``, ``infix``-style or ``attribute``
command before the declaration, by those commands (a user instance can change
what ``+`` means; real Lean's pp.all shows the instance used, the stand-in
shows every one in scope). Every such answer says ``stand-in`` in its text.
May import: standin.lexer, standin.syntax, standin.goals.
"""

from __future__ import annotations

from .decls import Decl, parse_decl, variable_binders
from .goals import axioms_of, signature
from .lexer import Positions, lex
from .syntax import DECL_KWS, Command, note_namespace, split_commands

__all__ = [
    "Facts",
    "context_text",
    "decl_info",
    "facts_of",
    "query_target",
    "render_check",
    "render_print",
]

# Commands whose effect on later statements the rendering records.
CONTEXT_KWS = frozenset(
    [
        "instance",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "attribute",
        "local",
        "scoped",
        "macro",
        "macro_rules",
        "syntax",
    ]
)
# Lean's `mkHeader` (src/Lean/Elab/Print.lean) writes these before the kind, in this order.
PRINTED_MODIFIERS = ("private", "protected", "meta")


PRINTED_KIND = {
    "theorem": "theorem",
    "lemma": "theorem",
    "def": "def",
    "instance": "def",
    "abbrev": "@[reducible] def",
    "opaque": "opaque",
    "axiom": "axiom",
    "structure": "structure",
    "class": "class",
    "inductive": "inductive",
    "example": "def",
}


class Facts:
    """Declarations and `variable` binders introduced by one command text."""

    __slots__ = ("decls", "variables")

    def __init__(self):
        # name -> (signature, axioms, printed kind, statement rendering, body,
        #          the header modifiers `#print` shows: private / protected / meta)
        self.decls: dict[str, tuple] = {}
        self.variables: list[tuple[str, str, str]] = []


def _tokens(text: str) -> str:
    return " ".join(t.text for t in lex(text))


def context_text(cmd: Command, text: str) -> str | None:
    """The normalized text of a command that can change later statements, else None."""
    if cmd.kw not in CONTEXT_KWS:
        return None
    return _tokens(text[cmd.start : cmd.end])


def decl_info(d: Decl, text: str, full: str, find, variables: list, context: list[str]) -> tuple:
    """One declaration's env entry (see `Facts.decls`)."""
    binders = " ".join(f"({name} : {kind_type})" for name, kind_type, _ in variables if kind_type)
    if d.binder_span:
        binders = (binders + " " + _tokens(text[d.binder_span[0] : d.binder_span[1]])).strip()
    statement = _tokens(text[d.type_span[0] : d.type_span[1]]) if d.type_span else (d.type or "")
    rendering = f"∀ {binders}, {statement}" if binders else statement
    if context:
        rendering += f" [stand-in: elaborated after: {' ; '.join(context)}]"
    body = ""
    if d.value_span:
        body = _tokens(text[d.value_span[0] : d.value_span[1]])
        body = body[2:].strip() if body.startswith(":=") else body
    return (
        signature(d, text),
        axioms_of(d, full, find),
        PRINTED_KIND.get(d.kw, d.kw),
        rendering,
        body,
        tuple(m for m in PRINTED_MODIFIERS if m in d.mods),
    )


def facts_of(text: str) -> Facts:
    f = Facts()
    if not text:
        return f
    toks = lex(text)
    pos = Positions(text)
    ns: list[str] = []
    context: list[str] = []
    for cmd in split_commands(toks, text, pos):
        note_namespace(cmd, ns)
        if cmd.kw == "variable":
            f.variables.extend(variable_binders(cmd, text))
        elif cmd.kw in DECL_KWS:
            d = parse_decl(cmd, text)
            if d is not None and d.name:
                full = ".".join(ns + [d.name])
                info = decl_info(d, text, full, f.decls.get, f.variables, context)
                f.decls[full] = info
                f.decls.setdefault(d.name, info)
        extra = context_text(cmd, text)
        if extra is not None:
            context.append(extra)
    return f


def query_target(cmd: Command, keyword: str):
    """(name token, explicit `@`, pp.all set) of ``[set_option pp.all true in] KEYWORD [@]NAME``, or None."""
    toks = cmd.toks
    at = next((i for i, t in enumerate(toks) if t.text == keyword), None)
    if at is None or at + 1 >= len(toks):
        return None
    pp_all = any(t.text == "pp.all" for t in toks[:at])
    k = at + 1
    explicit = toks[k].text == "@"
    if explicit:
        k += 1
    if k >= len(toks) or toks[k].kind != "id":
        return None
    return toks[k], explicit, pp_all


def render_check(name: str, info: tuple, pp_all: bool) -> str:
    """The `#check` answer: the signature, or with pp.all the statement rendering."""
    if not pp_all or len(info) < 5:
        return info[0]
    return f"{name} : {info[3]}"


def render_print(name: str, info: tuple) -> str:
    """The `#print NAME` answer: modifiers, kind, name, statement, and a definition's body."""
    kind, rendering, body = info[2], info[3], info[4]
    attrs, _, word = kind.rpartition(" ")  # "@[reducible] def": attributes come first
    mods = "".join(f"{m} " for m in (info[5] if len(info) > 5 else ()))
    head = f"{attrs + ' ' if attrs else ''}{mods}{word} {name} : {rendering}"
    if kind in ("axiom", "opaque") or not body:
        return head
    return f"{head} :=\n{body}"
