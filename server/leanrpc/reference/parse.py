"""Reading a reference: its header and the declarations it pins.

A reference is the problem's own formal text, as miniF2F, ProofNet or
PutnamBench state it: imports, `open`/`set_option` lines, and declarations
whose proofs are `sorry`. Declarations are found with core.declarations (the
check_axioms scanner: comments, strings, namespaces, `«»` names); the
reference's tokens (what runs code, whether a body is `sorry`) are read by
the one lexer, core.lexer (Lean's tokenizer), and text it cannot read for
certain is refused. A bad reference is a RequestError, raised at the edge
before anything runs.
May import: leanrpc.core (declarations, headers, lexer), leanrpc.errors.
"""

from __future__ import annotations

import bisect
import dataclasses

from ..core.declarations import TYPE_KINDS, declarations
from ..core.headers import HeaderSplit, split_header
from ..core.lexer import HASH, IDENT, SYMBOL, LexError, Token, lex
from ..errors import RequestError

__all__ = ["Reference", "ReferenceDecl", "parse_reference", "pin_of"]

# What a reference may pin, and the kind Lean's `#print` shows for it. A type
# (structure, inductive, class) is pinned whole: its `#print` (fields or
# constructors with their types) must read the same in the snippet's env.
PRINTED_KIND = {
    "theorem": "theorem",
    "lemma": "theorem",
    "def": "def",
    "abbrev": "def",
    "instance": "def",
    "opaque": "opaque",
    "structure": "structure",
    "inductive": "inductive",
    "class": "class",
}
MAX_DECLARATIONS = 64
# A reference is elaborated on a REPL like a snippet: it may state
# declarations, never run code or weaken checking (issue 25 item 1's list).
# Read by the one lexer, so a mention in a comment or string is fine and a
# glued `#evalIO.println` is the `#eval` Lean reads.
_CODE_RUNNING = frozenset(
    {
        "run_cmd",
        "run_elab",
        "run_meta",
        "run_tac",
        "elab_rules",
        "elab",
        "macro_rules",
        "macro",
        "syntax",
        "declare_syntax_cat",
        "builtin_initialize",
        "initialize",
        "unsafe",
        "implemented_by",
        "extern",
    }
)
_CODE_RUNNING_HASH = ("#eval", "#exit")
_CODE_RUNNING_OPTIONS = ("debug.", "compiler.", "interpreter.")
# Scope commands between a declaration and the next one are not its body.
_SCOPE = frozenset({"end", "namespace", "section", "open", "noncomputable"})


@dataclasses.dataclass(frozen=True)
class ReferenceDecl:
    name: str
    kind: str  # the reference's keyword (theorem, lemma, def, abbrev, ...)
    body_is_sorry: bool  # a def/abbrev whose body is `sorry`: any body passes

    @property
    def printed_kind(self) -> str:
        return PRINTED_KIND[self.kind]

    @property
    def is_type(self) -> bool:
        return self.kind in TYPE_KINDS


@dataclasses.dataclass(frozen=True)
class Reference:
    text: str
    split: HeaderSplit
    decls: tuple[ReferenceDecl, ...]

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.decls]


def parse_reference(
    text: str, *, max_chars: int = 1_000_000, field: str = "reference"
) -> Reference:
    """The reference's header and pinned declarations; RequestError if unusable."""
    if not text.strip():
        raise RequestError("the reference is empty", field=field)
    if len(text) > max_chars:
        raise RequestError(
            f"the reference has {len(text)} characters, over the limit of {max_chars}", field=field
        )
    if "\x00" in text:
        raise RequestError("the reference contains a NUL character", field=field)
    split = split_header(text)
    body = split.body
    try:
        tokens = lex(body)
        found = declarations(body, types=True)  # masks with the same lexer
    except LexError as error:
        line = split.body_start_line + body.count("\n", 0, error.offset)
        raise RequestError(
            f"the reference cannot be read for certain as Lean reads it: {error} at line {line}",
            field=field,
        ) from None
    running = _code_running(body, tokens)
    if running is not None:
        word, at = running
        line = split.body_start_line + body.count("\n", 0, at)
        raise RequestError(
            f"the reference may only state declarations: `{word}` at line {line} "
            "runs code or weakens checking",
            field=field,
        )
    starts = [token.start for token in tokens]
    decls: list[ReferenceDecl] = []
    for index, decl in enumerate(found):
        if decl.kind == "instance" and not decl.name:
            continue  # context for the statements (e.g. `instance : Fact p`), nothing to pin by name
        if decl.kind == "example" or not decl.name:
            raise RequestError(
                f"the reference has an unnamed {decl.kind}: every declaration it pins needs a name",
                field=field,
            )
        if decl.kind not in PRINTED_KIND:
            raise RequestError(
                f"the reference pins {decl.name} as {decl.kind!r}, which cannot be pinned",
                field=field,
            )
        end = found[index + 1].offset if index + 1 < len(found) else len(body)
        segment = tokens[bisect.bisect_left(starts, decl.offset) : bisect.bisect_left(starts, end)]
        body_is_sorry = _sorry_body(body, _without_scope(body, segment))
        # A theorem's proof in the reference is never compared (only its
        # type), so one given there is harmless: the Prover pins to a start
        # statement that may already hold some tactics.
        decls.append(ReferenceDecl(decl.name, decl.kind, body_is_sorry))
    if not decls:
        raise RequestError("the reference declares no theorem, lemma or def to pin", field=field)
    if len(decls) > MAX_DECLARATIONS:
        raise RequestError(
            f"the reference pins {len(decls)} declarations, over the limit of {MAX_DECLARATIONS}",
            field=field,
        )
    names = [d.name for d in decls]
    if len(set(names)) != len(names):
        raise RequestError("the reference declares a name twice", field=field)
    return Reference(text=text, split=split, decls=tuple(decls))


def _code_running(text: str, tokens: list[Token]) -> tuple[str, int] | None:
    """The first token that runs code or weakens checking, and where."""
    for token in tokens:
        word = text[token.start : token.end]
        if token.kind == HASH and word.startswith(_CODE_RUNNING_HASH):
            return word, token.start  # Lean reads `#evalIO` as `#eval` `IO`
        if token.kind == IDENT and (
            word in _CODE_RUNNING or word.startswith(_CODE_RUNNING_OPTIONS)
        ):
            return word, token.start
    return None


def _without_scope(text: str, tokens: list[Token]) -> list[Token]:
    """A declaration's tokens less the scope commands (`end`, `namespace`,
    `section`, `open`, `noncomputable section`) on its last lines."""
    while tokens:
        line_start = text.rfind("\n", 0, tokens[-1].start) + 1
        k = len(tokens) - 1
        while k > 0 and tokens[k - 1].start >= line_start:
            k -= 1
        first = tokens[k]
        word = text[first.start : first.end]
        scope = (
            first.kind == IDENT and word in _SCOPE and not text[line_start : first.start].strip()
        )
        if word == "noncomputable":
            after = tokens[k + 1] if k + 1 < len(tokens) else None
            scope = scope and after is not None and text[after.start : after.end] == "section"
        if not scope or k == 0:
            break
        tokens = tokens[:k]
    return tokens


def _sorry_body(text: str, tokens: list[Token]) -> bool:
    """Whether the tokens end with `:= sorry` or `:= by sorry`."""
    words = [text[t.start : t.end] for t in tokens[-4:]]
    if words[-1:] != ["sorry"] or tokens[-1].kind != IDENT:
        return False
    words, rest = words[:-1], tokens[:-1]
    if words[-1:] == ["by"]:
        words, rest = words[:-1], rest[:-1]
    if len(rest) < 2 or words[-2:] != [":", "="]:
        return False
    colon, equals = rest[-2], rest[-1]
    return colon.kind == SYMBOL and equals.kind == SYMBOL and colon.end == equals.start


def pin_of(code: str) -> str:
    """`code` itself when it can serve as its own reference, else "".

    StartProof pins the whole-proof check to its own statement this way; a
    start with only an `example` (no name to pin) is not pinned.
    """
    try:
        parse_reference(code)
    except RequestError:
        return ""
    return code
