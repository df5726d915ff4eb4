"""Reading a reference: its header and the declarations it pins.

A reference is the problem's own formal text, as miniF2F, ProofNet or
PutnamBench state it: imports, `open`/`set_option` lines, and declarations
whose proofs are `sorry`. Declarations are found with core.declarations (the
check_axioms scanner: comments, strings, namespaces, `«»` names). A bad
reference is a RequestError, raised at the edge before anything runs.
"""

from __future__ import annotations

import dataclasses
import re

from ..core.declarations import TYPE_KINDS, declarations, mask
from ..core.headers import HeaderSplit, split_header
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
_SORRY_BODY = re.compile(r":=\s*(?:by\s+)?sorry\s*$")
# Scope commands between a declaration and the next one are not its body.
_TRAILING_SCOPE = re.compile(
    r"(?:\n[ \t]*(?:end|namespace|section|open|noncomputable section)\b[^\n]*|\s)+$"
)
MAX_DECLARATIONS = 64
# A reference is elaborated on a REPL like a snippet: it may state
# declarations, never run code or weaken checking (issue 25 item 1's list).
# Comments and strings are masked first, so a mention there is fine.
_CODE_RUNNING = re.compile(
    r"(?<![\w.'])(#eval|#exit|run_cmd|run_elab|run_meta|run_tac|elab_rules|elab|macro_rules|macro|"
    r"syntax|declare_syntax_cat|builtin_initialize|initialize|unsafe|implemented_by|extern|"
    r"debug\.[\w.]+|compiler\.[\w.]+|interpreter\.[\w.]+)(?![\w'])"
)


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
    found = declarations(split.body, types=True)
    masked = mask(split.body)
    running = _CODE_RUNNING.search(masked)
    if running:
        line = split.body_start_line + masked.count("\n", 0, running.start())
        raise RequestError(
            f"the reference may only state declarations: `{running.group(1)}` at line {line} "
            "runs code or weakens checking",
            field=field,
        )
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
        end = found[index + 1].offset if index + 1 < len(found) else len(masked)
        segment = _TRAILING_SCOPE.sub("", masked[decl.offset : end])
        body_is_sorry = bool(_SORRY_BODY.search(segment))
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
