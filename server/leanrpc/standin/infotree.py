"""Stand-in infotree and `declarations` builders (REPL-PROTOCOL.md 5.6, 11).

Owns: the JSON shapes of syntax nodes, TacticInfo and CommandInfo nodes and
the fork's `declarations` entries. May import: standin.syntax (Decl, Command).
"""

from __future__ import annotations

import re

from .decls import Decl
from .syntax import KIND_NAMES, Command, Tok


def syntax_node(start: dict, finish: dict, pp, kind: str, arg_kinds: list) -> dict:
    return {
        "range": {"synthetic": False, "start": start, "finish": finish},
        "pp": pp,
        "kind": kind,
        "argKinds": arg_kinds,
    }


# Kinds as Lean names them: `·` is `Lean.cdot` (Init/NotationExtra.lean, namespace
# Lean), not a Lean.Parser.Tactic name; other symbols get Lean's generated
# notation names (`«tactic_<;>_»`), never an empty last component.
_KINDS = {
    "rfl": "Lean.Parser.Tactic.tacticRfl",
    "sorry": "Lean.Parser.Tactic.tacticSorry",
    "·": "Lean.cdot",
    ".": "Lean.cdot",
}


def _tactic_kind(word: str) -> str:
    known = _KINDS.get(word)
    if known is not None:
        return known
    name = re.sub(r"\W", "", word)
    return "Lean.Parser.Tactic." + (name or f"«tactic_{word}_»")


def tactic_node(
    tt: list[Tok], ttext: str, P, goals_before: list[str], goals_after: list[str]
) -> dict:
    kind = _tactic_kind(tt[0].text)
    return {
        "kind": "TacticInfo",
        "node": {
            "stx": syntax_node(P(tt[0].start), P(tt[-1].end), ttext, kind, [tt[0].text]),
            "name": kind,
            "goalsBefore": list(goals_before),
            "goalsAfter": list(goals_after),
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


def command_node(cmd: Command, text: str, P, children: list) -> dict:
    kind, elab = _CMD_KIND.get(
        cmd.kw, ("Lean.Parser.Command.declaration", "Lean.Elab.Command.elabDeclaration")
    )
    return {
        "kind": "CommandInfo",
        "node": {
            "stx": syntax_node(P(cmd.start), P(cmd.end), text[cmd.start : cmd.end], kind, [cmd.kw]),
            "elaborator": elab,
        },
        "children": children,
    }


def declaration_entry(d: Decl, text: str, P, ns: list[str]) -> dict:
    def piece(span):
        if span is None:
            return None
        return {
            "range": {"synthetic": False, "start": P(span[0]), "finish": P(span[1])},
            "pp": text[span[0] : span[1]],
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
            "range": {
                "synthetic": False,
                "start": P(d.binder_span[0]),
                "finish": P(d.binder_span[1]),
            },
            "pp": text[d.binder_span[0] : d.binder_span[1]],
            "map": [
                {"type": ty, "id": nm if nm != "inst✝" else "", "binderInfo": bk}
                for nm, ty, bk in d.binders
            ],
            "groups": [],
        }
    name = d.name or "_example"
    return {
        "value": piece(d.value_span),
        "type": piece(d.type_span),
        "signature": piece(sig_span),
        "scope": {
            "varDecls": [],
            "openDecl": [],
            "omitVars": [],
            "levelNames": [],
            "includeVars": [],
            "currNamespace": ".".join(ns) if ns else "[anonymous]",
        },
        "range": {"synthetic": False, "start": P(d.start), "finish": P(d.end)},
        "pp": text[d.start : d.end],
        "name": name,
        "modifiers": {
            "visibility": "private"
            if "private" in d.mods
            else ("protected" if "protected" in d.mods else "regular"),
            "recKind": "partial"
            if "partial" in d.mods
            else ("nonrec" if "nonrec" in d.mods else "default"),
            "isUnsafe": "unsafe" in d.mods,
            "isProtected": "protected" in d.mods,
            "docString": None,
            "computeKind": "noncomputable" if "noncomputable" in d.mods else "regular",
            "attributes": [],
        },
        "kind": KIND_NAMES.get(d.kw, d.kw),
        "fullName": ".".join(ns + [name]),
        "binders": binders,
    }
