"""Taking the Lean code out of a completion, by fixed and versioned rules.

Owns `extract(text, fence=...)` -> `Extracted(code, rule)` and
`EXTRACTION_VERSION`. Pure text work (re only): no client, no server. The rules,
applied in this order (docs/REWARDS.md, "Extraction"); each reward reports the
rule that found its code and this version:

1. `special_tokens`: chat special tokens are removed (`<|im_start|>`, `<|im_end|>`,
   `<｜Assistant｜>`, `<s>`, `</s>`, `[INST]`, …); a role name left at a line's start by
   `<|im_start|>assistant` is dropped with it.
2. `reasoning`: `<think>…</think>` (also `<reasoning>`, `<thinking>`) is removed; an
   unclosed opening tag drops the rest of the text, a closing tag without an opening
   one drops everything before it (the template opened it in the prompt).
3. `fence`: the last (default) or first fenced block tagged `lean`, `lean4` or
   untagged; a block left open at the end counts (generation stopped at the fence).
4. `bare`: with no fence, the whole remaining text when it looks like Lean (a
   declaration keyword at a line start, or it begins with `:=`, `by`, `import` or one
   of the common opening tactics in `_TACTICS`).
5. Otherwise no code: the reward is 0 with the reason NO_CODE.
"""

from __future__ import annotations

import dataclasses
import re

EXTRACTION_VERSION = "leanrpc-extract/1"
FENCE_LAST, FENCE_FIRST = "last", "first"
NO_CODE = "NO_CODE"

_SPECIAL = re.compile(
    r"<\|im_start\|>(?:system|user|assistant|tool)?\n?|<\|[A-Za-z_][\w.\-]*\|>|"
    r"<｜[^｜\n]{1,40}｜>|</?s>|\[/?INST\]|<<SYS>>|<</SYS>>"
)
_REASONING_TAGS = ("think", "thinking", "reasoning")
_FENCE = re.compile(r"```[ \t]*(lean4?|)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S | re.I)
# A bare tactic block is recognised by its first word (the tactics provers open with).
_TACTICS = (
    "intro intros rintro omega simp simp_all norm_num nlinarith linarith positivity ring "
    "ring_nf field_simp rw rwa exact apply refine have obtain rcases cases induction "
    "constructor use unfold decide aesop calc by_contra push_neg interval_cases subst"
).split()
_LEANISH = re.compile(
    r"^\s*(?::=|by\b|import\s)|^(?:theorem|lemma|example|def|abbrev|open|namespace)\s|"
    rf"\A\s*(?:{'|'.join(map(re.escape, _TACTICS))})(?![\w'])",
    re.M,
)


@dataclasses.dataclass(frozen=True)
class Extracted:
    code: str  # "" when no code was found
    rule: str  # "fence", "bare" or NO_CODE
    cleaned: tuple[str, ...] = ()  # the cleaning rules that changed the text
    version: str = EXTRACTION_VERSION


def strip_special_tokens(text: str) -> str:
    return _SPECIAL.sub("", text)


def strip_reasoning(text: str) -> str:
    for tag in _REASONING_TAGS:
        text = re.sub(rf"<{tag}>.*?</{tag}>", "", text, flags=re.S | re.I)
        close = re.search(rf"</{tag}>", text, re.I)
        if close is not None:  # opened by the chat template, in the prompt
            text = text[close.end() :]
        opened = re.search(rf"<{tag}>", text, re.I)
        if opened is not None:  # still thinking when generation stopped
            text = text[: opened.start()]
    return text


def extract(text: str, *, fence: str = FENCE_LAST) -> Extracted:
    """The Lean code of a completion, and the rule that found it."""
    if fence not in (FENCE_LAST, FENCE_FIRST):
        raise ValueError(f"fence must be {FENCE_LAST!r} or {FENCE_FIRST!r}, not {fence!r}")
    if not isinstance(text, str):
        raise TypeError(f"a completion is a str, not {type(text).__name__}")
    cleaned = []
    plain = strip_special_tokens(text)
    if plain != text:
        cleaned.append("special_tokens")
    unreasoned = strip_reasoning(plain)
    if unreasoned != plain:
        cleaned.append("reasoning")
    blocks = [body for _tag, body in _FENCE.findall(unreasoned) if body.strip()]
    if blocks:
        code = blocks[-1] if fence == FENCE_LAST else blocks[0]
        return Extracted(code.strip("\n"), "fence", tuple(cleaned))
    if "```" not in unreasoned and _LEANISH.search(unreasoned):
        return Extracted(unreasoned.strip("\n"), "bare", tuple(cleaned))
    return Extracted("", NO_CODE, tuple(cleaned))
