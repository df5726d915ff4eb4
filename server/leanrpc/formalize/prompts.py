"""Prompts for the repair loop.

Every prompt is a short chat: system, the task, and, after a failed attempt,
that attempt (as the assistant's turn) plus the feedback. Only the latest
attempt is kept, so prompt length stays bounded however many rounds run.
The assistant turn is pre-filled with a ```lean fence and generation stops at
the closing fence, so the output is the code and nothing else.
"""

from __future__ import annotations

from typing import Sequence

ASSISTANT_PREFIX = "```lean\n"
STOP = ("```",)

SYSTEM = (
    "You are an expert in Lean 4 and Mathlib. You translate informal mathematics into Lean 4 "
    "theorem statements that type-check against Mathlib. Reply with exactly one Lean code block "
    "holding one declaration of the form `theorem <name> <binders> : <statement> := by sorry`. "
    "State the theorem faithfully; do not prove it (the proof is `sorry`), do not repeat the "
    "header, and do not add imports or other declarations."
)


def task_message(informal: str, header: str, retrieved: Sequence[tuple[str, str, str]] = ()) -> str:
    parts = [
        "The Lean file starts with this header (it is already there):",
        f"```lean\n{header.strip()}\n```",
    ]
    if retrieved:
        parts.append("Mathlib declarations that may be relevant:")
        parts.append(
            "\n".join(
                f"- `{name}` ({kind.split('(')[0]}, {module})" for name, kind, module in retrieved
            )
        )
    parts.append("Informal statement:")
    parts.append(informal.strip())
    parts.append("Write the Lean 4 theorem statement, ending in `:= by sorry`.")
    return "\n\n".join(parts)


def feedback_message(
    *,
    errors: str = "",
    not_well_formed: str = "",
    suggestions: dict[str, list[str]] | None = None,
    truncated: bool = False,
) -> str:
    parts = []
    if not_well_formed:
        parts.append(f"That is not a well-formed statement: {not_well_formed}.")
    if truncated:
        parts.append("The answer was cut off; write a shorter statement.")
    if errors:
        parts.append("Lean reports these errors:")
        parts.append(f"```\n{errors}\n```")
    if suggestions:
        lines = [
            f"- `{name}`: did you mean " + ", ".join(f"`{c}`" for c in cands) + "?"
            for name, cands in suggestions.items()
            if cands
        ]
        unknown = [name for name, cands in suggestions.items() if not cands]
        if lines:
            parts.append("Unknown names, with similar Mathlib declarations:")
            parts.append("\n".join(lines))
        if unknown:
            parts.append(
                "No similar Mathlib name was found for: "
                + ", ".join(f"`{n}`" for n in unknown)
                + "."
            )
    parts.append(
        "Fix the statement without changing its meaning. Reply with the corrected theorem only, "
        "ending in `:= by sorry`."
    )
    return "\n\n".join(parts)


def build_messages(
    task: str, last_attempt: str | None = None, feedback: str | None = None
) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
    if last_attempt is not None and feedback is not None:
        messages.append(
            {"role": "assistant", "content": f"{ASSISTANT_PREFIX}{last_attempt.strip()}\n```"}
        )
        messages.append({"role": "user", "content": feedback})
    return messages


def render_chat(tokenizer, messages: Sequence[dict]) -> str:
    """The prompt text for `messages` plus the assistant header (ChatML if the tokenizer has no template)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=False
        )
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"
