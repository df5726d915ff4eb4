"""The `proof` code policy: what a snippet may not contain before any REPL
sees it (issue 25 item 1; issue 43: read as Lean reads it, fail closed).
Imported through policy.scan, which picks this file's compiled build
(setup.py compiles it unchanged with Cython as policy.reading_c).

Owns: `scan(text) -> Scan`, the first refused construct (named, with its
line and column) and whether the text asks for native evaluation.

The text is read by the one lexer (leanrpc.core.lexer, Lean's tokenizer
ported), so a keyword is a keyword exactly where Lean's tokenizer makes one:
`#evalIO.println` and `trivial#eval` hold the `#`-word `#eval…`,
`run_cmd«IO»` the keyword `run_cmd`, and a `]` inside a string or comment
does not end an attribute list. Where the lexer cannot read the text for
certain (Lean's own lexing errors, a string whose end depends on
interpolation, a char literal or comment glued to a symbol that may be a
longer token), the text is refused: after a lexing error Lean's recovery
resumes inside the text and may run what follows.

Refused, from the lists in leanrpc.policy.lists:
- a `#`-word that is not an allowed read-only command (`#check`, `#print`,
  `#reduce`, …), however glued; `#` before a capital, a digit or a
  non-ASCII letter is notation (`#S`, Mathlib's cardinal), not a command,
  and so is `#` before one lowercase letter (Mathlib's `#s`, core's
  `#v[…]`): the lexer reads the letter's own token after it, as Lean does,
  so `#s'"'` and `#r"…"` hide nothing;
- a keyword that runs the snippet's code or defines syntax (`run_cmd`,
  `elab`, `macro`, `initialize`, `unsafe`, …) and the tactics, terms and
  commands generated from Lean's and Mathlib's sources (`polyrith`,
  `plausible`, `by_elab`, `eval%` where the identifier `eval` is glued to
  `%` as Lean's longest-match rule reads it);
- an attribute name, in `@[…]` or `attribute […]`, outside the allow-list,
  and a list it cannot read: a bracket where a name is due, a closer that
  is not its opener's;
- `set_option` with an option outside the allow-list;
- a token-adding command (`notation`, `infix`, …) whose atom could change
  how later text lexes (a quote, `«`, `»`, `#`, a backtick, or a `-`/`/`
  inside a longer atom: comment openers);
- code handed to a standard tactic (policy.handover: a configuration that holds
  code, an Aesop `(add …)` clause), read in context after the tactic.
Native evaluation (`native_decide`, any `native` name: `decide +native`,
`+«native»`, `(config := {«native» := true})`; `decide (config := …)` with
any config; `Lean.reduceBool`, `ofReduceBool`, …) is reported, not
refused: the verify service answers it by the axiom rule (services.verify).

Only the text up to the last place where a construct could be (a C-speed
needle search, leanrpc.core.needles.positions) is lexed: text after it
holds none, whatever its reading. Text in, verdict out.
May import: leanrpc.core.lexer, leanrpc.core.needles, leanrpc.core._impl,
leanrpc.policy.lists, leanrpc.policy.handover (or its compiled build, handover_c).
"""

from __future__ import annotations

import bisect
import dataclasses

from ..core._impl import extensions_disabled
from ..core.lexer import (
    DOC,
    HASH,
    IDENT,
    PIECE,
    STR,
    SYMBOL,
    Lexer,
    LexError,
    Token,
    ident_name,
    line_col,
)
from ..core.needles import positions
from .lists import (
    AESOP_PREFIX,
    ALLOWED_ATTRIBUTES,
    ALLOWED_HASH,
    ALLOWED_OPTIONS,
    ATTRIBUTE_MODIFIERS,
    CODE_CONFIG_TACTICS,
    GLUED_COMMANDS,
    NATIVE_NAMES,
    NOTATION_COMMANDS,
    REFUSED_COMMANDS,
    REFUSED_OPTION_PREFIXES,
)

if extensions_disabled():
    from .handover import context_marks, exact_tokens, handed_over
else:  # the same source, compiled (setup.py), as this module is on the hot path
    from .handover_c import context_marks, exact_tokens, handed_over  # type: ignore

__all__ = ["Scan", "scan", "CANDIDATES", "UNREADABLE"]


@dataclasses.dataclass(frozen=True, slots=True)
class Scan:
    """What the policy found: `refused` ("" when allowed) names the first
    construct, `line`/`column` where it starts; `native` the first native
    evaluation ("" when none); `reason` why the construct is refused."""

    refused: str = ""
    line: int = 0
    column: int = 0
    native: str = ""
    native_line: int = 0
    reason: str = ""

    @property
    def message(self) -> str:
        if not self.refused:
            return ""
        return (
            f"refused by the code policy `proof`: {self.refused} at line {self.line}, "
            f"column {self.column}: {self.reason}; see docs/SECURITY.md"
        )


ALLOWED = Scan()
UNREADABLE = "text the policy cannot read for certain"
_RUNS = "runs the snippet's own code while Lean elaborates (or weakens checking)"
_CLOSER = {"[": "]", "(": ")", "{": "}", "⟨": "⟩"}  # an attribute argument's brackets
_CLOSERS = frozenset(_CLOSER.values())

# Every construct the policy looks at contains one of these (a keyword,
# `#`, `@[`, a native name): one C-speed pass finds them, and only the text
# up to the last one is lexed.
CANDIDATES = (
    "#",
    "@[",
    "run_",
    "elab",
    "macro",
    "syntax",
    "initialize",
    "unsafe",
    "attribute",
    "set_option",
    "native",
    "reduceBool",
    "reduceNat",
    "ofReduce",
    "simproc",
    "register_",
    "declare_",
    "config",
    "notation",
    "infix",
    "prefix",
    "postfix",
)
# The generated words no needle above finds (`polyrith`, `plausible`, `eval`).
CANDIDATES += tuple(
    sorted(
        word
        for word in REFUSED_COMMANDS | set(GLUED_COMMANDS)
        if not any(needle in word for needle in CANDIDATES)
    )
)
assert all(any(needle in word for needle in CANDIDATES) for word in REFUSED_COMMANDS)


def scan(text: str) -> Scan:
    """The policy's verdict on one snippet (or tactic, or reference)."""
    found = positions(text, CANDIDATES)
    context = context_marks(text)
    # A string with a `{` may end where only interpolation says (core.lexer):
    # then the whole text is read, since what such a string hides could also
    # be a declaration the axiom check must see (core/declarations.py).
    braces = '"' in text and "{" in text
    if not found and not braces and not context:
        return ALLOWED
    if any(text.startswith("config", at) for at in found):
        # `decide (config := …)`: the `decide` before it matters. (`config`
        # is a candidate: the offsets found say whether the text holds one,
        # without another pass over a text of wide characters.)
        found = sorted(found + positions(text, ("decide",)))
    if context:
        found = sorted(set(found + context))
    reader = _Reader(text, found)
    try:
        return reader.read(len(text) if braces else found[-1] + 1)
    except LexError as error:
        return reader.refused(UNREADABLE, error.offset, error.reason)


class _Reader:
    __slots__ = ("text", "lexer", "native", "native_at")

    def __init__(self, text: str, marks: list[int]) -> None:
        self.text = text
        self.lexer = Lexer(text, marks)
        self.native = ""
        self.native_at = 0

    def refused(self, construct: str, at: int, reason: str) -> Scan:
        line, column = line_col(self.text, at)
        return Scan(
            refused=construct,
            line=line,
            column=column,
            native=self.native,
            native_line=line_col(self.text, self.native_at)[0] if self.native else 0,
            reason=reason,
        )

    def read(self, until: int) -> Scan:
        lexer, text = self.lexer, self.text
        i = 0
        while True:
            token = lexer.get(i)
            if token is None or token.start >= until:
                break
            kind = token.kind
            if kind == HASH:
                word = text[token.start : token.end]
                if not _hash_allowed(word):
                    return self.refused(
                        word, token.start, "a `#` command outside the read-only allow-list"
                    )
            elif kind == IDENT:
                verdict = self.ident(i, token)
                if verdict is not None:
                    return verdict
            elif kind == PIECE and token.start in lexer.after_hole:
                verdict = self.after_hole(token.start)
                if verdict is not None:
                    return verdict
            elif kind == SYMBOL and text[token.start] == "@":
                nxt = lexer.get(i + 1, exact=True)
                if nxt is not None and nxt.start == token.end and text[nxt.start] == "[":
                    verdict = self.attributes(i + 2)
                    if verdict is not None:
                        return verdict
            i += 1
        if self.native:
            return Scan(native=self.native, native_line=line_col(text, self.native_at)[0])
        return ALLOWED

    def after_hole(self, at: int) -> Scan | None:
        """A string piece after an interpolation hole (its `}` at `at`), in a string an
        interpolating parser may read (core.lexer `Lexer.after_hole`: not after an
        operator or opener). Should the hole not parse as a term, Lean's `parseCommand`
        resumes at the error, inside the string, and reads what follows as commands:
        so no construct the policy looks at (no candidate needle) may come after it,
        in the string or past it."""
        marks = self.lexer.marks or ()
        later = bisect.bisect_right(marks, at)
        if later == len(marks):
            return None
        return self.refused(
            UNREADABLE,
            marks[later],
            "a construct after a string's interpolation hole (should the hole not parse, "
            "Lean reads on from inside the string)",
        )

    def ident(self, i: int, token: Token) -> Scan | None:
        text = self.text
        raw = text[token.start : token.end]
        if raw in REFUSED_COMMANDS:
            return self.refused(raw, token.start, _RUNS)
        for glued in GLUED_COMMANDS.get(raw, ()):
            if text.startswith(glued, token.start):
                return self.refused(glued, token.start, _RUNS)
        if raw == "set_option":
            return self.option(i + 1)
        if raw == "attribute":
            i += 1
            nxt = self.lexer.get(i, exact=True)
            while nxt is not None and nxt.kind == DOC:  # read as if the doc comment were not there
                i += 1
                nxt = self.lexer.get(i, exact=True)
            if nxt is not None and text[nxt.start : nxt.end] == "[":
                return self.attributes(i + 1)
            return None
        if raw in NOTATION_COMMANDS:
            return self.notation(i + 1)
        if raw == "add" or raw in CODE_CONFIG_TACTICS or raw.startswith(AESOP_PREFIX):
            handed = handed_over(self.lexer, text, i, raw)
            if handed is not None:
                construct, reason = handed
                return self.refused(construct, token.start, reason)
        name = ident_name(text, token)
        last = name.rsplit(".", 1)[-1]
        if last in NATIVE_NAMES or (raw == "decide" and self.has_config(i + 1)):
            self.note_native(raw, token.start)
        return None

    def note_native(self, what: str, at: int) -> None:
        if not self.native:
            self.native, self.native_at = what, at

    def has_config(self, i: int) -> bool:
        """`decide (config := …)`: a configuration may select native evaluation."""
        first, second = self.lexer.get(i, exact=True), self.lexer.get(i + 1, exact=True)
        if first is None or second is None:
            return False
        return self.text[first.start : first.end] == "(" and (
            self.text[second.start : second.end] == "config"
        )

    def option(self, i: int) -> Scan | None:
        token = self.lexer.get(i, exact=True)
        if token is None or token.kind != IDENT:
            at = len(self.text) if token is None else token.start
            return self.refused("set_option", at, "an option name the policy cannot read")
        name = ident_name(self.text, token)
        if _option_allowed(name):
            return None
        return self.refused(
            f"set_option {name}", token.start, "an option outside the allow-list " + _RUNS
        )

    def attributes(self, i: int) -> Scan | None:
        """The attribute list after `@[` or `attribute [` (token `i` is its
        first): each instance's name, after `local`/`scoped`/`-`, must be
        allowed; a nested bracket or string is the instance's argument. A
        bracket where a name is due, or a closer that does not match its
        opener, is a list the policy cannot read (fail closed: where its end
        is in Lean's reading is not certain)."""
        lexer, text = self.lexer, self.text
        closers: list[str] = []  # the open brackets' closers, innermost last (the depth)
        expect_name = True
        while True:
            token = lexer.get(i, exact=True)
            if token is None:
                return self.refused("attribute", len(text), "an attribute list that does not end")
            word = text[token.start : token.end]
            if token.kind == SYMBOL and word in _CLOSER:
                if not closers and expect_name:
                    return self.refused(
                        "attribute", token.start, "an attribute the policy cannot read"
                    )
                closers.append(_CLOSER[word])
            elif token.kind == SYMBOL and word in _CLOSERS:
                if not closers and word == "]" and not expect_name:
                    return None
                if not closers or closers.pop() != word:
                    return self.refused(
                        "attribute", token.start, "an attribute list the policy cannot read"
                    )
            elif not closers and token.kind == SYMBOL and word == ",":
                expect_name = True
            elif not closers and expect_name:
                if token.kind == SYMBOL and word == "-":  # `attribute [-simp] f` erases
                    i += 1
                    continue
                if token.kind != IDENT:
                    return self.refused(
                        "attribute", token.start, "an attribute the policy cannot read"
                    )
                name = ident_name(text, token)
                if name in ATTRIBUTE_MODIFIERS:
                    i += 1
                    continue
                if name not in ALLOWED_ATTRIBUTES:
                    return self.refused(
                        f"attribute {name}", token.start, "an attribute outside the allow-list"
                    )
                expect_name = False
            elif token.kind == IDENT and ident_name(text, token).rsplit(".", 1)[-1] in NATIVE_NAMES:
                self.note_native(word, token.start)
            i += 1

    def notation(self, i: int) -> Scan | None:
        """The atoms (string literals) of a token-adding command, up to its `=>`."""
        lexer, text = self.lexer, self.text
        for at, token, word in exact_tokens(lexer, text, i):
            if token.kind == SYMBOL and word == "=":
                nxt = lexer.get(at + 1, exact=True)
                if nxt is not None and nxt.start == token.end and text[nxt.start] == ">":
                    return None
            if token.kind == SYMBOL and word == "⇒":
                return None
            if token.kind == STR and not _atom_allowed(word[1:-1].strip()):
                return self.refused(
                    f"notation {word}", token.start, "a token that could change how Lean lexes"
                )
        return None


def _hash_allowed(word: str) -> bool:
    """`#` alone (notation: `#[…]`, `#S`, Mathlib's `#s` for `Finset.card s`
    and core's `#v[…]`, which the lexer reads as `#` and then the letter's
    token, as Lean does), or exactly a read-only command."""
    return word == "#" or word in ALLOWED_HASH


def _option_allowed(name: str) -> bool:
    if name.startswith(REFUSED_OPTION_PREFIXES):
        return False
    return name in ALLOWED_OPTIONS or any(
        p.endswith(".") and name.startswith(p) for p in ALLOWED_OPTIONS
    )


_LEXING_CHARS = frozenset("\"'«»#`\\")


# Atoms already in core Lean's token table (`5#3`, BitVec literals): a
# notation using one adds nothing to the table.
_TABLE_ATOMS = frozenset({"#"})


def _atom_allowed(atom: str) -> bool:
    """Whether a notation atom leaves Lean's lexing of other text as it is."""
    if atom in _TABLE_ATOMS:
        return True
    if not atom or _LEXING_CHARS.intersection(atom):
        return False
    return len(atom) == 1 or not ("-" in atom or "/" in atom)
