"""The problem's statement, and the program a completion's code makes with it.

Owns `Problem` (the dataset's formal statement and header) and `Problem.program(code)`:
the Lean file to verify and the reference that pins its statement. Pure text work.

A completion's code comes in two shapes (docs/REWARDS.md, "The statement is pinned"):

* a whole file: it declares the theorem itself (a declaration keyword at a line
  start). Without `import` lines, the problem's header goes in front.
* a proof: the text after the statement, starting with `:=`, with `by`, or a bare
  tactic block. The statement (up to its last top-level `:=`) goes in front.

In both, the statement with `:= by sorry` becomes the snippet's reference, so a
changed statement, a missing theorem or an added axiom fails the server's check.
"""

from __future__ import annotations

import dataclasses
import re

DEFAULT_HEADER = "import Mathlib"
_DECL = re.compile(
    r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*(?:theorem|lemma|example)\s",
    re.M,
)
_IMPORT = re.compile(r"^\s*import\s", re.M)
_OPEN = "([{⟨⦃"
_CLOSE = ")]}⟩⦄"


def _top_level_assign(text: str) -> int:
    """Index of the last `:=` outside brackets, or -1."""
    depth, found = 0, -1
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(":=", i):
            found = i
    return found


@dataclasses.dataclass(frozen=True)
class Problem:
    """A formal statement (miniF2F style: `theorem name … := by` or `… := by sorry`)
    and the header it needs ("" = the statement's own imports, else "import Mathlib")."""

    statement: str
    header: str = ""

    def _parts(self) -> tuple[str, str]:
        """(header, the statement without its proof)."""
        text = self.statement.strip("\n")
        header = self.header.strip("\n")
        decl = _DECL.search(text)
        if decl is not None and decl.start() > 0:  # the statement carries its header
            header = "\n".join(h for h in (header, text[: decl.start()].strip("\n")) if h)
            text = text[decl.start() :]
        if not _IMPORT.search(header):
            header = "\n".join(h for h in (DEFAULT_HEADER, header) if h)
        cut = _top_level_assign(text)
        head = (text[:cut] if cut >= 0 else text).rstrip()
        return header, head

    @property
    def reference(self) -> str:
        header, head = self._parts()
        return f"{header}\n\n{head} := by sorry\n"

    def program(self, code: str) -> tuple[str, str]:
        """(the Lean file to verify, its shape: "file" or "proof")."""
        header, head = self._parts()
        body = code.strip("\n")
        if _DECL.search(body):
            return (body if _IMPORT.search(body) else f"{header}\n\n{body}") + "\n", "file"
        stripped = body.lstrip()
        if stripped.startswith(":="):
            proof = f"{head} {stripped}"
        elif re.match(r"by\b", stripped):
            proof = f"{head} := {stripped}"
        else:
            lines = body.splitlines()
            indent = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
            tactics = "\n".join("  " + ln[indent:] if ln.strip() else "" for ln in lines)
            proof = f"{head} := by\n{tactics}"
        return f"{header}\n\n{proof}\n", "proof"
