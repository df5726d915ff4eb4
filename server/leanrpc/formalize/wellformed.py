"""Cheap static checks on a candidate statement, before Lean sees it.

`extract_candidate(model_text)` pulls one `theorem ... := by sorry` declaration out
of what the model wrote (code fences, prose, doc comments, a second declaration
are dropped; a leading `lemma` becomes `theorem`, a term-mode `:= sorry`
becomes `:= by sorry`). `check(candidate)` then reports:

* balanced_delimiters: () [] {} ⟨⟩ ⦃⦄ «» nest properly, ignoring comments and strings;
* has_theorem_signature: `theorem <name> <binders> : <type>` with a non-empty type
  before the top-level `:=`;
* ends_with_by_sorry: the proof is exactly `by sorry` (any whitespace).
"""

from __future__ import annotations

import dataclasses
import re

from ..core.leantext import block_comment_end, string_literal_end

_OPEN = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄", "«": "»"}
_CLOSE = {v: k for k, v in _OPEN.items()}

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_DECL_START = re.compile(r"^(?:theorem|lemma)\s", re.M)
# Column-0 commands that end the candidate declaration.
_NEXT_COMMAND = re.compile(
    r"^(?:theorem|lemma|def|example|abbrev|instance|structure|class|inductive|end|namespace|section|open|"
    r"import|variable|set_option|noncomputable|#\w+|/--|@\[)",
    re.M,
)
_BY_SORRY = re.compile(r":=\s*by\s+sorry\s*\Z")
_TERM_SORRY = re.compile(r":=(\s*)sorry\s*\Z")
_NAME = re.compile(r"theorem\s+([^\s:(\[{⦃⟨]+)")


@dataclasses.dataclass(frozen=True)
class WellFormedness:
    balanced_delimiters: bool
    has_theorem_signature: bool
    ends_with_by_sorry: bool
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.balanced_delimiters and self.has_theorem_signature and self.ends_with_by_sorry


def extract_candidate(text: str) -> str:
    """The first theorem declaration in the model's output, or the stripped text if there is none."""
    blocks = [b for b in _FENCE.findall(text) if _DECL_START.search(b)]
    body = blocks[0] if blocks else text
    m = _DECL_START.search(body)
    if m is None:
        return body.strip()
    rest = body[m.start() :].split("```")[0]  # an unmatched closing fence
    nxt = _NEXT_COMMAND.search(rest, 1)
    if nxt is not None:
        rest = rest[: nxt.start()]
    rest = rest.strip()
    if rest.startswith("lemma"):
        rest = "theorem" + rest[len("lemma") :]
    # Term-mode `:= sorry` states the same thing; spell it the way the check wants.
    return _TERM_SORRY.sub(lambda m: ":= by" + (m.group(1) or " ") + "sorry", rest)


def _strip_comments_and_strings(code: str) -> str:
    """Blanks out comments and string literals (keeps length and line structure)."""
    out = []
    i, n = 0, len(code)
    while i < n:
        if code.startswith("/-", i):
            j = block_comment_end(code, i)
        elif code.startswith("--", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
        elif code[i] == '"':
            j = string_literal_end(code, i)
        else:
            out.append(code[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", code[i:j]))
        i = j
    return "".join(out)


def _balance(code: str) -> str:
    """'' if balanced, else why not."""
    stack: list[tuple[str, int]] = []
    for i, c in enumerate(code):
        if c in _OPEN:
            # « » are also identifier quotes, which are balanced pairs too.
            stack.append((c, i))
        elif c in _CLOSE:
            if not stack:
                return f"unmatched {c!r}"
            top, _ = stack.pop()
            if _OPEN[top] != c:
                return f"{top!r} closed by {c!r}"
    if stack:
        return f"unclosed {stack[-1][0]!r}"
    return ""


def _top_level(code: str):
    """Yields (index, char) of characters outside every bracket."""
    depth = 0
    for i, c in enumerate(code):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:
            yield i, c


def _signature_problem(code: str) -> str:
    stripped = code.lstrip()
    if not stripped.startswith("theorem"):
        return "does not start with `theorem`"
    if _NAME.match(stripped) is None:
        return "`theorem` has no name"
    colon = assign = -1
    for i, c in _top_level(stripped):
        if c == ":" and stripped.startswith(":=", i):
            assign = i  # the last top-level `:=` separates the proof
        elif (
            c == ":"
            and colon < 0
            and not stripped.startswith("::", i)
            and (i == 0 or stripped[i - 1] != ":")
        ):
            colon = i
    if assign < 0:
        return "no top-level `:=`"
    if colon < 0 or colon > assign:
        return "no type signature (`: <type>` before `:=`)"
    if not stripped[colon + 1 : assign].strip():
        return "empty type"
    return ""


def check(candidate: str) -> WellFormedness:
    """Runs the three checks; `reason` names the first failure (empty when ok)."""
    code = _strip_comments_and_strings(candidate)
    bal = _balance(code)
    sig = _signature_problem(code) if not bal else "unbalanced delimiters"
    ends = bool(_BY_SORRY.search(code.rstrip()))
    reasons = []
    if bal:
        reasons.append(f"unbalanced delimiters: {bal}")
    if sig and not bal:
        reasons.append(sig)
    if not ends:
        reasons.append("does not end with `:= by sorry`")
    return WellFormedness(
        balanced_delimiters=not bal,
        has_theorem_signature=not sig,
        ends_with_by_sorry=ends,
        reason="; ".join(reasons),
    )


def canonical_form(candidate: str) -> str:
    """The candidate with comments removed and whitespace collapsed (for deduplication)."""
    code = _strip_comments_and_strings_keep_strings(candidate)
    blanked = _strip_comments_and_strings(code)  # strings blanked: whitespace inside them is kept
    out, i = [], 0
    for m in re.finditer(r"\s+", blanked):
        out.append(code[i : m.start()])
        out.append(
            code[m.start() : m.end()]
            if blanked[m.start() : m.end()] != code[m.start() : m.end()]
            else " "
        )
        i = m.end()
    out.append(code[i:])
    return "".join(out).strip()


def _strip_comments_and_strings_keep_strings(code: str) -> str:
    out = []
    i, n = 0, len(code)
    while i < n:
        if code.startswith("/-", i):
            i = block_comment_end(code, i)
            out.append(" ")
        elif code.startswith("--", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code[i] == '"':
            j = string_literal_end(code, i)
            out.append(code[i:j])
            i = j
        else:
            out.append(code[i])
            i += 1
    return "".join(out)


def signature_parts(candidate: str) -> tuple[str, str, str] | None:
    """(`theorem name`, binders, type) of a well-formed candidate, comments removed; None if not parsable."""
    code = _strip_comments_and_strings_keep_strings(candidate).strip()
    blanked = _strip_comments_and_strings(code)
    m = _NAME.match(blanked)
    if m is None:
        return None
    colon = assign = -1
    for i, c in _top_level(blanked):
        if c == ":" and blanked.startswith(":=", i):
            assign = i
        elif (
            c == ":"
            and colon < 0
            and not blanked.startswith("::", i)
            and (i == 0 or blanked[i - 1] != ":")
        ):
            colon = i
    if colon < m.end() or assign < colon:
        return None
    return code[: m.end()], code[m.end() : colon].strip(), code[colon + 1 : assign].strip()


def theorem_name(candidate: str) -> str:
    m = _NAME.match(candidate.lstrip())
    return m.group(1) if m else ""
