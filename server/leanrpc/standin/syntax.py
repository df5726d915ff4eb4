"""Stand-in parser: headers, commands, declarations and what an env knows.

Owns: `split_header`, splitting a text into commands at column-0 keywords,
bracket matching and namespaces (one declaration's insides are standin.decls;
goal, signature and tactic-block text is standin.goals; what a command adds
to its env is standin.statements).
May import: standin.lexer.
"""

from __future__ import annotations

import bisect

from .lexer import CLOSE_BRACKETS, OPEN_BRACKETS, Positions, Tok, iter_tokens

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


def note_namespace(cmd: Command, ns: list[str]) -> None:
    if cmd.kw == "namespace" and len(cmd.toks) > 1:
        ns.extend(cmd.toks[1].text.split("."))
    elif cmd.kw == "end" and len(cmd.toks) > 1 and ns:
        for _ in cmd.toks[1].text.split("."):
            if ns:
                ns.pop()
