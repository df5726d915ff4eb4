"""Find the declarations of a Lean body that can carry a proof, for check_axioms.

Imported through core.declarations, which picks this file's compiled build
(setup.py compiles it unchanged with Cython as core.declaring_c).

Owns: scanning a snippet body for ``theorem``, ``lemma``, ``def``, ``abbrev``,
``opaque``, ``instance`` and ``example`` declarations (with ``private`` /
``protected`` / ``noncomputable`` / ... modifiers, ``@[...]`` attributes and
``open ... in`` prefixes), their fully qualified names (``namespace`` /
``section`` / ``mutual`` / ``end`` and ``_root_``), ``where`` auxiliaries, and
the rewrite that gives anonymous declarations a name so that
``#print axioms NAME`` can check them. Imports only core.masking (comments
and literals blanked where the one lexer, core.lexer, reads them; `mask` is
re-exported by core.declarations) and core.needles (the keywords' offsets in
one pass): a text the lexer cannot read for certain raises its LexError, and
no other reading of it is scanned. The scanning on top of the masked text
stays regex and `str.find` work (issue 38 item 6: fast).
Core layer: text in, text out. May import: leanrpc.core.masking, leanrpc.core.needles.

How each kind is checked (docs/SECURITY.md, "check_axioms"):

* named ``theorem``/``lemma``/``def``/``abbrev``/``opaque``/``instance``:
  ``#print axioms`` with the name qualified by the open namespaces;
* ``where`` auxiliaries of a declaration: ``#print axioms parent.aux``;
* ``example``: the keyword becomes ``noncomputable def <fresh>`` (Lean
  elaborates an example as a definition it then throws away; a
  noncomputable def is the same elaboration, kept, and never compiled);
* anonymous ``instance``: a fresh name is inserted after ``instance`` (and its
  ``(priority := ...)``).

The fresh names carry a per-request nonce, so a snippet cannot declare them
in advance. The rewrite shifts columns on the rewritten lines only;
`AxiomCheck.original_position` maps REPL positions back to the user's.
A name the scanner gets wrong makes ``#print axioms`` fail, and the service
then refuses the verdict (fail closed): a miss never yields VALID.
"""

from __future__ import annotations

import dataclasses
import re
import secrets

from .masking import IDENT_CHAR as _IDENT_CHAR
from .masking import mask
from .needles import positions

__all__ = [
    "AxiomCheck",
    "Declaration",
    "TYPE_KINDS",
    "declarations",
    "plan_axiom_check",
    "print_axioms_command",
]

PROOF_KINDS = ("theorem", "lemma", "def", "abbrev", "opaque", "instance", "example")

_MODIFIERS = (
    r"(?:(?:private|protected|noncomputable|partial|unsafe|nonrec|public|scoped|local)[ \t]+)*"
)
_ATTRIBUTES = r"(?:@\[[^\]]*\][ \t\n]*)*"
# The types a statement can be about (the reference check pins them too: a
# snippet must not redefine a structure the statement uses).
TYPE_KINDS = ("structure", "inductive", "class")
# No `\b` in front: `_declaration_keywords` refuses a keyword after a name
# character by hand, and a leading `\b` kept the regex engine from scanning for
# the keywords' first letters in C (issue 38 item 6).
_KEYWORD = re.compile(rf"(?:{'|'.join(PROOF_KINDS)})\b")
_TYPE_KEYWORD = re.compile(rf"(?:{'|'.join(TYPE_KINDS)})\b")
# A declaration keyword, and what may precede it on its line: attributes,
# modifiers, or a `... in` command modifier.
_LINE_PREFIX = re.compile(rf"[ \t]*(?:[^\n]*\bin[ \t]+)?{_ATTRIBUTES}{_MODIFIERS}")
# A scope command, matched at the start of its line (`_scopes` finds the
# candidates with str.find: a regex scan for the line starts cost more than
# the rest of the declaration scan; issue 38 item 6).
_SCOPE = re.compile(
    r"[ \t]*(?:noncomputable[ \t]+|public[ \t]+)?(?P<cmd>namespace|section|mutual|end)\b[ \t]*(?P<name>[^\s]*)"
)
_SCOPE_WORDS = ("namespace", "section", "mutual", "end")
_ATOM = r"(?:«[^»\n]*»|[^\W\d][\w'!?₀-₉ₐ-ₜᵢ-ᵪ]*)"
_NAME = re.compile(rf"[ \t\n]*(?P<name>{_ATOM}(?:\.{_ATOM})*)")
_PRIORITY = re.compile(r"[ \t\n]*\([ \t\n]*priority[ \t\n]*:=[^)]*\)")
_WHERE = re.compile(
    r"where\b"
)  # `\b` in front checked by hand (`_where`): a literal prefix is faster
_AUX = re.compile(rf"^(?P<indent>[ \t]*)(?P<name>{_ATOM})(?=[\s(\[{{⦃:])", re.M)
_KEYWORDS = frozenset(
    """theorem lemma def abbrev opaque instance example where extends by fun have show from at with
    do let in if then else match deriving termination_by decreasing_by""".split()
)


@dataclasses.dataclass(frozen=True)
class Declaration:
    """One declaration found in a body.

    Attributes:
        kind: the keyword (``theorem``, ``example``, ...).
        name: the fully qualified name, "" for an ``example`` or an
            anonymous ``instance``.
        offset: where the keyword starts in the body.
        name_at: where a fresh name goes for an anonymous declaration.
        auxiliaries: fully qualified names of its ``where`` auxiliaries.
    """

    kind: str
    name: str
    offset: int
    name_at: int
    auxiliaries: tuple[str, ...] = ()
    # `name` as Lean reads it back, `«»` kept (`«odd name»`): what `#print axioms` is given.
    print_name: str = ""


@dataclasses.dataclass
class AxiomCheck:
    """The body to run with check_axioms, and the names to check after it.

    Attributes:
        body: the body with fresh names for anonymous declarations.
        names: every name to pass to ``#print axioms``, in order.
        edits: (line, column, removed, inserted) of each rewrite, in user
            coordinates (1-based lines), for `original_position`.
    """

    body: str
    names: list[str]
    edits: list[tuple[int, int, int, int]]

    @property
    def print_command(self) -> str | None:
        """The command run after the body, or None if there is nothing to check."""
        return print_axioms_command(self.names)

    def original_position(self, line: int, column: int) -> tuple[int, int]:
        """Maps a position in the rewritten body back to the user's text."""
        shift = 0
        for edit_line, edit_column, removed, inserted in self.edits:
            if edit_line != line or column < edit_column:
                continue
            if column < edit_column + inserted:
                return line, edit_column - shift
            shift += inserted - removed
        return line, column - shift


def print_axioms_command(names: list[str]) -> str | None:
    """One `#print axioms _root_.NAME` line per name, as one command; None for no names.

    `_root_.` names the declaration exactly (Lean's `resolveExact`, src/Lean/ResolveName.lean,
    private declarations included), whatever namespaces the body left open: the command runs
    in the scopes the body ended in, where a bare `X` would name `N.X` first."""
    return "\n".join(f"#print axioms _root_.{name}" for name in names) if names else None


def declarations(body: str, *, types: bool = False, masked: str | None = None) -> list[Declaration]:
    """Every proof-carrying declaration in `body`, in text order; with
    `types`, the `structure`, `inductive` and `class` declarations too.
    `masked`: `mask(body)`, when the caller has it already."""
    if masked is None:
        masked = mask(body)
    events = [(m.start(), 1, m) for m in _declaration_keywords(masked)]
    if types:
        events += [
            (m.start(), 1, m) for m in _declaration_keywords(masked, _TYPE_KEYWORD, TYPE_KINDS)
        ]
    events += [(at, 0, m) for at, m in _scopes(masked)]
    events.sort(key=lambda event: (event[0], event[1]))
    scopes: list[tuple[str, str]] = []
    found: list[Declaration] = []
    decl_starts = [event[0] for event in events]
    for index, (_at, is_declaration, match) in enumerate(events):
        if not is_declaration:
            _enter_or_leave(scopes, match)
            continue
        kind = match.group()
        after = match.end()
        if kind == "class":  # `class inductive X`: the `inductive` event names it
            follows = _NAME.match(masked, after)
            if follows is not None and follows.group("name") == "inductive":
                continue
        prefix = ".".join(name for scope, name in scopes if scope == "namespace" and name)
        name = print_name = ""
        name_at = after
        if kind == "instance":
            priority = _PRIORITY.match(masked, after)
            if priority is not None:
                name_at = after = priority.end()
        if kind != "example":
            named = _NAME.match(masked, after)
            if named is not None and named.group("name") not in _KEYWORDS:
                name = _qualify(prefix, named.group("name"))
                print_name = _qualify(prefix, named.group("name"), keep_quotes=True)
                after = named.end()
        end = decl_starts[index + 1] if index + 1 < len(decl_starts) else len(masked)
        auxiliaries = (
            tuple(_qualify("", f"{name}.{aux}") for aux in _where_auxiliaries(masked[after:end]))
            if name
            else ()
        )
        found.append(
            Declaration(kind, name, match.start(), name_at, auxiliaries, print_name or name)
        )
    return found


def _declaration_keywords(
    masked: str, keyword: re.Pattern = _KEYWORD, words: tuple[str, ...] = PROOF_KINDS
) -> list:
    """Keyword tokens that start a declaration.

    A command can start anywhere (past column 400, after another command on
    the same line), but never inside brackets or attribute lists
    (`@[instance]`, `attribute [instance]`) nor after `deriving`. With
    unbalanced brackets every keyword token counts (fail closed).

    The candidates are found in one pass over the text (core.needles: a
    `str.find` pass per word cost a few microseconds each on a non-ASCII
    body, and a regex alternation more); `keyword` then matches at each
    candidate that is not glued to a name character. No keyword holds another one, and a
    keyword that matches ends before a non-name character, so these are the
    same matches `keyword.finditer` yields. Whether the brackets balance is
    asked only of a keyword inside brackets (the whole text is read then).
    """
    plain = _blank_names(masked)
    starts = positions(plain, words)  # sorted; no word starts another, so no offset twice
    balanced = None
    found = []
    for start in starts:
        if start and (plain[start - 1] == "." or _IDENT_CHAR.match(plain[start - 1])):
            continue
        match = keyword.match(plain, start)
        if match is None:
            continue
        end = match.end()
        if end < len(plain) and _IDENT_CHAR.match(plain[end]):
            continue
        if _depth_at(plain, start):
            if balanced is None:
                balanced = _balanced(plain)
            if balanced:
                continue
        before = max(0, start - 64)
        if plain.find("deriving", before, start) >= 0 and _DERIVING.search(plain, before, start):
            continue
        found.append(match)
    return found


_DERIVING = re.compile(r"\bderiving[ \t]+$")
_OPEN, _CLOSE = "([{⟨⦃", ")]}⟩⦄"


def _blank_names(masked: str) -> str:
    """`«...»` contents as spaces: a keyword inside a quoted name is no keyword."""
    return re.sub(r"«[^»\n]*»", lambda m: "«" + " " * (len(m.group()) - 2) + "»", masked)


_BRACKET = re.compile(r"[(\[{⟨⦃)\]}⟩⦄]")


def _balanced(plain: str) -> bool:
    """The brackets balance, and no prefix closes more than it opened. Only the
    brackets are visited: a loop over every character of the body cost more
    than the rest of the axiom plan (issue 38 item 6)."""
    depth = 0
    for char in _BRACKET.findall(plain):
        depth += 1 if char in _OPEN else -1
        if depth < 0:
            return False
    return depth == 0


def _depth_at(plain: str, at: int) -> int:
    """The bracket depth before the character at `at` (counted in C, per bracket kind)."""
    return sum(plain.count(char, 0, at) for char in _OPEN) - sum(
        plain.count(char, 0, at) for char in _CLOSE
    )


def plan_axiom_check(
    body: str, first_line: int = 1, first_column: int = 0, nonce: str | None = None
) -> AxiomCheck:
    """The rewritten body and the names to check (see the module docstring).

    `first_line`/`first_column` place the body in the user's text (the
    header split's body_start_line/body_start_column).
    """
    # The nonce is drawn only for a body that needs a fresh name (an `example` or an anonymous
    # `instance`): most bodies name every declaration, and os.urandom costs a system call.
    names: list[str] = []
    pieces: list[str] = []
    edits: list[tuple[int, int, int, int]] = []
    cursor = 0
    masked = mask(body)
    for number, declaration in enumerate(declarations(body, masked=masked)):
        if declaration.name:
            names.append(declaration.print_name or declaration.name)
            names.extend(declaration.auxiliaries)
            continue
        nonce = nonce or secrets.token_hex(4)
        fresh = f"_leanrpc_axiom_check_{nonce}_{number}"
        if declaration.kind == "example":
            start, removed, text = declaration.offset, len("example"), f"noncomputable def {fresh}"
        else:
            start, removed, text = declaration.name_at, 0, f" {fresh}"
        prefix = _prefix_at(masked, declaration.offset)
        names.append(f"{prefix}.{fresh}" if prefix else fresh)
        pieces.append(body[cursor:start])
        pieces.append(text)
        cursor = start + removed
        line_index = body.count("\n", 0, start)
        column = start - (body.rfind("\n", 0, start) + 1)
        if line_index == 0:
            column += first_column
        edits.append((first_line + line_index, column, removed, len(text)))
    pieces.append(body[cursor:])
    return AxiomCheck(body="".join(pieces), names=names, edits=edits)


def _qualify(prefix: str, name: str, keep_quotes: bool = False) -> str:
    if not keep_quotes:
        name = name.replace("«", "").replace("»", "")
    if name.startswith("_root_."):
        return name[len("_root_.") :]
    return f"{prefix}.{name}" if prefix else name


def _scopes(masked: str, end: int | None = None) -> list[tuple[int, re.Match]]:
    """Each scope command (`namespace`, `section`, `mutual`, `end`) at the start
    of a line (after blanks and `noncomputable`/`public`) that ends by `end`:
    (where its keyword starts in `masked`, its match), in text order."""
    stop = len(masked) if end is None else end
    found = []
    # Every scope word's offsets in one pass (core.needles), in order. A word
    # that starts before `stop` but ends after it never matches `_SCOPE`, which
    # reads no further than `stop`: the same commands as a find up to `stop`.
    for at in positions(masked, _SCOPE_WORDS, stop):
        line = masked.rfind("\n", 0, at) + 1
        match = _SCOPE.match(masked, line, stop)
        if match is not None and match.start("cmd") == at:
            found.append((at, match))
    return found


def _prefix_at(masked: str, offset: int) -> str:
    """The namespace prefix open at `offset` of a masked body."""
    scopes: list[tuple[str, str]] = []
    for _at, match in _scopes(masked, offset):
        _enter_or_leave(scopes, match)
    return ".".join(name for scope, name in scopes if scope == "namespace" and name)


def _enter_or_leave(scopes: list[tuple[str, str]], match: re.Match) -> None:
    """`scopes` after one scope command (`_SCOPE`'s match): `end` closes the
    innermost scope, any other opens one (a `mutual` block has no name)."""
    command = match.group("cmd")
    if command == "end":
        if scopes:
            scopes.pop()
    else:
        scopes.append((command, match.group("name") if command != "mutual" else ""))


def _where(text: str) -> re.Match | None:
    """The first `where` that is a whole word (regex `\bwhere\b`)."""
    for found in _WHERE.finditer(text):
        at = found.start()
        if not at or not (text[at - 1].isalnum() or text[at - 1] == "_"):
            return found
    return None


def _where_auxiliaries(text: str) -> list[str]:
    """Names declared in a `where` block after the value (`:= ... where aux ...`).

    A `where` right after the signature is structure-instance notation
    (fields, not declarations): only a `where` after `:=` counts.
    """
    where = _where(text)
    if where is None or ":=" not in text[: where.start()]:
        return []
    block = text[where.end() :]
    first = _NAME.match(block)
    if first is None or first.group("name") in _KEYWORDS:
        return []
    names = [first.group("name")]
    line_start = block.rfind("\n", 0, first.start("name")) + 1
    if "\n" not in block[: first.start("name")]:
        return names  # `where aux ...` on the where line: one auxiliary seen
    indent = first.start("name") - line_start
    for aux in _AUX.finditer(block, first.end()):
        if len(aux.group("indent")) == indent and aux.group("name") not in _KEYWORDS:
            names.append(aux.group("name"))
        elif len(aux.group("indent")) < indent:
            break
    return names
