"""What a REPL answer means for a snippet: verdicts, messages, sorries.

Owns: `classify` (a body's answer -> `VerifyResult`), `message_from_repl`,
`sorry_from_repl`, the axiom check of `#print axioms` answers, and the sorry
warning spellings.
May import: leanrpc.results, leanrpc.repl.protocol, the standard library.
Nothing from pool/ or services/: `classify` reads any outcome object with the
attributes of `pool.BodyOutcome` (duck-typed, so the pool may import us).
"""

from __future__ import annotations

import re

import msgspec

from ..results import (
    Message,
    Position,
    ReuseInfo,
    Severity,
    SorryInfo,
    Status,
    Timings,
    VerifyResult,
)
from .protocol import Pos, ReplMessage, ReplSorry, Response

__all__ = [
    "NATIVE_AXIOMS",
    "STANDARD_AXIOMS",
    "apply_axiom_check",
    "as_response",
    "classify",
    "message_from_repl",
    "require_every_axiom_check",
    "sorry_from_repl",
]

STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
# `native_decide` shows up as these axioms.
NATIVE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})

# Both spellings: 'sorry' (Lean <= 4.27) and `sorry` (Lean >= 4.28).
SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")
_AXIOMS_LINE = re.compile(r"'(?P<name>[^']+)' depends on axioms: \[(?P<axioms>[^\]]*)\]", re.S)


def as_response(raw) -> Response:
    """A typed Response from a typed one or a decoded dict."""
    if isinstance(raw, Response):
        return raw
    return msgspec.convert(raw, Response)


def classify(snippet_id: str, outcome, check_axioms: bool) -> VerifyResult:
    """The verdict for one body. `outcome` has the fields of `pool.BodyOutcome`."""
    response = as_response(outcome.response)
    result = VerifyResult(
        id=snippet_id,
        status=Status.VALID,
        timings=Timings(
            queue_s=outcome.queue_s, header_s=outcome.header_s, body_s=outcome.body_s, boot_s=outcome.boot_s
        ),
        reuse=ReuseInfo(
            warm_header=outcome.warm_header,
            reused_prefix_chars=outcome.reused_prefix_chars,
            worker=outcome.worker,
            attempts=outcome.attempts,
        ),
    )
    if response.env is None and response.message is not None:
        # A request-level REPL error ("Unknown environment.", exceptions).
        result.status = Status.REJECTED
        result.error = f"REPL error: {response.message}"
        return result
    # Messages on the open/set_option preamble come first, at their positions
    # in the user's text: an error there makes the snippet INVALID, as Lean
    # would for the whole file (issue 15 item 5).
    preamble = getattr(outcome, "preamble_messages", ())
    result.messages = [message_from_repl(m) for m in (*preamble, *response.messages)]
    result.sorries = [sorry_from_repl(s) for s in response.sorries if s.pos is not None or s.goal]
    if response.infotree is not None:
        result.infotree = response.infotree
    has_error = any(m.severity is Severity.ERROR for m in result.messages)
    has_sorry = bool(result.sorries) or any(
        m.severity is Severity.WARNING and SORRY_WARNING.search(m.text) for m in result.messages
    )
    if has_error:
        result.status = Status.INVALID
    elif has_sorry:
        result.status = Status.SORRY
    if check_axioms:
        after = outcome.after_response
        apply_axiom_check(result, None if after is None else as_response(after))
    return result


def apply_axiom_check(result: VerifyResult, after: Response | None) -> None:
    """Reads `#print axioms` answers; downgrades VALID on sorry or foreign axioms."""
    if after is None:
        return
    used: set[str] = set()
    for message in after.messages:
        match = _AXIOMS_LINE.search(message.data)
        if match:
            used.update(a.strip() for a in match.group("axioms").split(",") if a.strip())
    result.axioms = sorted(used)
    if result.status is not Status.VALID:
        return
    if "sorryAx" in used:
        result.status = Status.SORRY
        return
    native = used & NATIVE_AXIOMS
    extra = used - STANDARD_AXIOMS - NATIVE_AXIOMS
    if native:
        result.status = Status.REJECTED
        result.error = f"proof uses native_decide / compiler trust ({', '.join(sorted(native))})"
    elif extra:
        result.status = Status.REJECTED
        result.error = f"proof uses non-standard axioms: {', '.join(sorted(extra))}"


# One answer per `#print axioms` name: "'n' depends on axioms: [...]" or
# "'n' does not depend on any axioms".
_AXIOMS_ANSWER = re.compile(r"'[^']+' (?:depends on axioms: \[|does not depend on any axioms)")


def require_every_axiom_check(result: VerifyResult, after: Response | None, names: list[str]) -> None:
    """Fail closed: a VALID stands only if `#print axioms` answered for every name."""
    if result.status is not Status.VALID or not names:
        return
    messages = after.messages if after is not None else []
    answered = sum(1 for m in messages if _AXIOMS_ANSWER.search(m.data))
    errors = [m.data for m in messages if m.severity == "error"]
    if after is None or errors or answered < len(names):
        result.status = Status.REJECTED
        detail = "; ".join(errors)[:300] or f"{answered} of {len(names)} answered"
        result.error = f"check_axioms could not check every declaration ({', '.join(names)}): {detail}"


def _position(pos) -> Position | None:
    if pos is None:
        return None
    if isinstance(pos, Pos):
        return Position(int(pos.line), int(pos.column))
    return Position(int(pos.get("line", 0)), int(pos.get("column", 0)))


def message_from_repl(raw: ReplMessage | dict) -> Message:
    """A REPL message (struct, or the wire dict) as a result `Message`."""
    if isinstance(raw, dict):
        raw = ReplMessage(
            severity=raw.get("severity", "info"),
            pos=_dict_pos(raw.get("pos")),
            end_pos=_dict_pos(raw.get("endPos")),
            data=str(raw.get("data", "")),
        )
    return Message(
        severity=Severity.from_repl(raw.severity),
        start=_position(raw.pos) or Position(0, 0),
        end=_position(raw.end_pos),
        text=raw.data,
    )


def sorry_from_repl(raw: ReplSorry | dict) -> SorryInfo:
    if isinstance(raw, dict):
        raw = ReplSorry(pos=_dict_pos(raw.get("pos")), end_pos=_dict_pos(raw.get("endPos")), goal=str(raw.get("goal", "")))
    return SorryInfo(start=_position(raw.pos), end=_position(raw.end_pos), goal=raw.goal)


def _dict_pos(pos: dict | None) -> Pos | None:
    return None if not pos else Pos(int(pos.get("line", 0)), int(pos.get("column", 0)))
