"""Plausible mode: a rough, deterministic imitation of Lean's elaborator.

Owns: `elaborate` (one command text -> an `Elab`), driven by a table of
command handlers (`_HANDLERS`: keyword -> handler). The pieces live in their
own rooms: lexer (tokens, positions), syntax (headers, commands,
declarations, env facts), goals (goal, signature and tactic-block text), infotree (node builders), evaluate (`#eval`),
tactics (tactic mode). May import those; used by standin.repl.

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
* ``by decide`` on a closed natural-number comparison that is false
  (``2 + 3 = 6``) is Lean's error "tactic 'decide' proved that the
  proposition … is false";
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
  ``<;>`` lines continue the previous tactic;
* the tactic ``leanrpc_unsound`` closes any goal in tactic mode, but a
  declaration using it is an error: a simulated wrong "Completed".
"""

from __future__ import annotations

from .decls import parse_decl, variable_binders
from .evaluate import decide_refutes, evaluate_command
from .goals import first_constant, goal_text, have_goal, tactic_blocks
from .infotree import command_node, declaration_entry, syntax_node, tactic_node
from .lexer import Positions, lex, message
from .statements import (
    Facts,
    context_text,
    decl_info,
    facts_of,
    query_target,
    render_check,
    render_print,
)
from .syntax import (
    CMD_KWS,
    DECL_KWS,
    Command,
    is_mathlib,
    module_known,
    note_namespace,
    split_commands,
    split_header,
)
from .tactics import KERNEL_REJECT, TACTIC_MODE_ONLY, run_tactic, sends_proof_status, status

__all__ = [
    "Elab",
    "Facts",
    "elaborate",
    "facts_of",
    "is_mathlib",
    "module_known",
    "run_tactic",
    "split_header",
    "status",
    "sends_proof_status",
    "KERNEL_REJECT",
]


class Elab:
    """Everything a command response needs, before ids are handed out."""

    __slots__ = (
        "messages",
        "sorries",
        "root_goals",
        "tactics",
        "infotree",
        "declarations",
        "facts",
    )

    def __init__(self):
        self.messages: list[dict] = []
        self.sorries: list[tuple[dict, list[str]]] = []  # (entry without proofState, goals)
        self.root_goals: list[tuple[dict, list[str]]] = []
        self.tactics: list[tuple[dict, list[str]]] = []
        self.infotree: list | None = None
        self.declarations: list | None = None


class _Context:
    """One `elaborate` call: the text, its options and what commands add."""

    def __init__(
        self,
        text,
        out,
        pos,
        lookup,
        variables,
        lean_version,
        sorry_style,
        all_tactics,
        root_goals,
        declarations,
    ):
        self.text = text
        self.out = out
        self.pos = pos
        self.P = pos.pos
        self.lookup = lookup
        self.local: dict[str, tuple] = {}  # this text's declarations by full name
        self.short: dict[str, tuple] = {}  # and by the name they were declared with
        self.variables = list(variables)
        self.ns: list[str] = []
        self.lean_version = lean_version
        self.sorry_word = (
            "declaration uses `sorry`" if sorry_style != "quote" else "declaration uses 'sorry'"
        )
        self.all_tactics = all_tactics
        self.root_goals = root_goals
        self.declarations = declarations
        self.tactic_nodes: list = []
        self.decl_entries: list = []
        self.context: list[str] = []  # instance/notation commands so far (standin.statements)

    def find(self, name):
        return self.resolve(name)[1]

    def resolve(self, name):
        """(the name `name` resolves to, what it names), as Lean resolves it within one
        command text: the innermost open namespace first, then outward to the root;
        then a name declared by its last atom in this text (the stand-in's `open`);
        then the env (those two: the name as written)."""
        if name.startswith("_root_."):  # exactly the root-level name (Lean's resolveExact)
            name = name[7:]
            return name, self.local.get(name) or self.lookup(name)
        ns = self.ns
        for depth in range(len(ns), -1, -1):
            full = ".".join([*ns[:depth], name]) if depth else name
            info = self.local.get(full)
            if info is not None:
                return full, info
        return name, self.short.get(name) or self.lookup(name)

    def error(self, tok, data: str, severity: str = "error") -> None:
        self.out.messages.append(message(severity, self.P(tok.start), self.P(tok.end), data))


# -- one handler per command keyword; each appends to ctx.out and returns the
# -- infotree children of the command


def _cmd_import(ctx: _Context, cmd: Command) -> list:
    ctx.error(cmd.toks[0], "invalid 'import' command, it must be used in the beginning of the file")
    return []


def _cmd_variable(ctx: _Context, cmd: Command) -> list:
    ctx.variables.extend(variable_binders(cmd, ctx.text))
    return []


def _cmd_eval(ctx: _Context, cmd: Command) -> list:
    evaluate_command(cmd, ctx.text, ctx.P, ctx.out.messages, ctx.lean_version)
    return []


# `#check` of core types the stand-in knows without a declaration (Lean prints these).
BUILTIN_SIGNATURES = {
    "Nat": "Nat : Type",
    "Int": "Int : Type",
    "String": "String : Type",
    "Bool": "Bool : Type",
    "Prop": "Prop : Type",
    "True": "True : Prop",
    "False": "False : Prop",
}


def _cmd_check(ctx: _Context, cmd: Command) -> list:
    target = query_target(cmd, "#check")
    if target is None:
        return []
    tok, explicit, pp_all = target
    info = ctx.find(tok.text)
    at = next(t for t in cmd.toks if t.text == "#check")
    if info is not None:
        ctx.error(at, render_check(tok.text.removeprefix("_root_."), info, pp_all), "info")
    elif tok.text in BUILTIN_SIGNATURES:
        ctx.error(at, BUILTIN_SIGNATURES[tok.text], "info")
    elif explicit:
        ctx.error(tok, f"unknown identifier '{tok.text}'")
    return []


def _cmd_print(ctx: _Context, cmd: Command) -> list:
    if len(cmd.toks) > 2 and cmd.toks[1].text == "axioms":
        name, info = ctx.resolve(cmd.toks[2].text)  # Lean names the constant it resolved
        if info is None:
            ctx.error(cmd.toks[2], f"Unknown constant `{cmd.toks[2].text}`")
        else:
            # Lean names the constant it resolved, a private one with its prefix
            # (`mkPrivateName`: `_private.<main module>.0 ++ n`; the REPL's main
            # module is anonymous).
            if len(info) > 5 and "private" in info[5]:
                name = "_private.0." + name
            if info[1]:
                ctx.error(
                    cmd.toks[0], f"'{name}' depends on axioms: [{', '.join(info[1])}]", "info"
                )
            else:
                ctx.error(cmd.toks[0], f"'{name}' does not depend on any axioms", "info")
        return []
    target = query_target(cmd, "#print")
    if target is not None:
        tok = target[0]
        info = ctx.find(tok.text)
        at = next(t for t in cmd.toks if t.text == "#print")
        if info is not None and len(info) >= 5:
            ctx.error(at, render_print(tok.text.removeprefix("_root_."), info), "info")
        elif info is None:
            ctx.error(tok, f"unknown constant '{tok.text}'")
    return []


def _cmd_declaration(ctx: _Context, cmd: Command) -> list:
    d = parse_decl(cmd, ctx.text)
    if d is None:
        return []
    text, P, out = ctx.text, ctx.P, ctx.out
    children: list = []
    hyps = ctx.variables + [b for b in d.binders if b[1]]
    goal = goal_text(hyps, d.type) if d.type else None
    for e in d.errors:
        ctx.error(e, f"Unknown identifier `{e.text}`")
    for t in d.body:
        if t.text in TACTIC_MODE_ONLY:
            # Simulates a proof that tactic mode reports Completed but the
            # whole command rejects (the Prover's whole-proof check).
            ctx.error(
                t,
                f"(stand-in) `{t.text}` closes goals in tactic mode only; the kernel rejects the proof",
            )
    body_words = [t.text for t in d.body]
    if body_words == ["by", "decide"] and not hyps and d.type and decide_refutes(d.type):
        ctx.error(
            d.body[1],
            f"tactic 'decide' proved that the proposition\n  {d.type}\nis false",
        )
    for s in d.sorry_toks:
        g = have_goal(d, s, text, hyps) or goal
        if g is not None:
            out.sorries.append(({"pos": P(s.start), "goal": g, "endPos": P(s.end)}, [g]))
    if d.sorry_toks or d.admit:
        ctx.error(d.name_tok or d.kw_tok, ctx.sorry_word, "warning")
    if d.by_tok is not None and goal is not None:
        b = d.by_tok
        if ctx.root_goals:
            out.root_goals.append(({"pos": P(b.start), "goal": goal, "endPos": P(b.start)}, [goal]))
        goals = [goal]
        for tt in tactic_blocks(d.body[1:], ctx.pos):
            ttext = text[tt[0].start : tt[-1].end]
            # Goals threaded through the stand-in's own tactic mode, so that
            # its infotree and its tactic mode agree (Extract's replay check).
            ran = run_tactic(ttext, goals, False)
            after = goals if ran.error is not None else ran.goals
            if ctx.all_tactics:
                used = sorted({t.text for t in tt if t.kind == "id" and "." in t.text})
                out.tactics.append(
                    (
                        {
                            "usedConstants": used,
                            "tactic": ttext,
                            "pos": P(tt[0].start),
                            # The goals before this tactic, as the REPL prints them.
                            "goals": "\n\n".join(goals) or "no goals",
                            "endPos": P(tt[-1].end),
                        },
                        list(goals),  # its proof state: just before this tactic
                    )
                )
            node = tactic_node(tt, ttext, P, goals, after)
            children.append(node)
            ctx.tactic_nodes.append(node)
            goals = after
    if d.name:
        full = ".".join(ctx.ns + [d.name])
        ctx.local[full] = ctx.short[d.name] = decl_info(
            d, text, full, ctx.find, ctx.variables, ctx.context
        )
    if ctx.declarations:
        ctx.decl_entries.append(declaration_entry(d, text, P, ctx.ns))
    return children


def _cmd_other(ctx: _Context, cmd: Command) -> list:
    return []  # open, namespace, section, set_option, ...: shapes only


_HANDLERS = {
    "import": _cmd_import,
    "variable": _cmd_variable,
    "#eval": _cmd_eval,
    "#check": _cmd_check,
    "#print": _cmd_print,
    **{kw: _cmd_declaration for kw in DECL_KWS},
}


def _handler(cmd: Command):
    if cmd.kw in _HANDLERS:
        return _HANDLERS[cmd.kw]
    return _cmd_other if cmd.kw in CMD_KWS else _cmd_unexpected


def _cmd_unexpected(ctx: _Context, cmd: Command) -> list:
    first = cmd.toks[0]
    what = "identifier" if first.kind == "id" else f"token '{first.text}'"
    ctx.error(first, f"unexpected {what}; expected command")
    return []


def _broken_env_error(ctx: _Context, cmd: Command) -> None:
    first = cmd.toks[0]
    if cmd.kw == "open" and len(cmd.toks) > 1:
        ctx.error(first, f"unknown namespace '{cmd.toks[1].text}'")
    else:
        ctx.error(first, f"unknown constant '{first_constant(cmd)}'")


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
    ctx = _Context(
        text,
        out,
        pos,
        lookup,
        variables,
        lean_version,
        sorry_style,
        all_tactics,
        root_goals,
        declarations,
    )
    tree: list = []
    for cmd in split_commands(toks, text, pos) if toks else []:
        if broken:
            _broken_env_error(ctx, cmd)
            continue
        note_namespace(cmd, ctx.ns)
        children = _handler(cmd)(ctx, cmd)
        extra = context_text(cmd, text)
        if extra is not None:
            ctx.context.append(extra)
        if infotree == "full":
            tree.append(command_node(cmd, text, ctx.P, children))
    if infotree == "full":
        end = ctx.P(len(text))
        tree.append(
            {
                "kind": "CommandInfo",
                "node": {
                    "stx": syntax_node(end, end, "", "Lean.Parser.Command.eoi", ["«»"]),
                    "elaborator": "Lean.Elab.Command.elabEoi",
                },
                "children": [],
            }
        )
        out.infotree = tree
    elif infotree in ("tactics", "original", "substantive"):
        out.infotree = ctx.tactic_nodes or None
    if declarations:
        out.declarations = ctx.decl_entries
    return out
