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
    TacticInfo,
    Timings,
    VerifyResult,
)
from .protocol import Pos, ReplMessage, ReplSorry, ReplTactic, Response

__all__ = [
    "NATIVE_AXIOMS",
    "STANDARD_AXIOMS",
    "apply_axiom_check",
    "as_response",
    "axiom_answer",
    "check_axiom_answers",
    "classify",
    "is_native_axiom",
    "message_from_repl",
    "name_atoms",
    "require_every_axiom_check",
    "sorry_from_repl",
    "tactic_from_repl",
]

STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
# `native_decide` shows up as these axioms.
NATIVE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})

# Both spellings: 'sorry' (Lean <= 4.27) and `sorry` (Lean >= 4.28).
SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")


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
            queue_s=outcome.queue_s,
            header_s=outcome.header_s,
            body_s=outcome.body_s,
            boot_s=outcome.boot_s,
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
    # `rootGoals: true` adds zero-width entries (pos == endPos): the tactic
    # blocks' starting goals, not sorries (issue 41); a real sorry has width
    # (the five characters of `sorry`). They go to `root_goals`, never to the
    # sorries, so a finished proof asked with rootGoals stays VALID.
    result.sorries = []
    for entry in response.sorries:
        if _is_root_goal(entry):
            result.root_goals.append(sorry_from_repl(entry))
        elif entry.pos is not None or entry.goal:
            result.sorries.append(sorry_from_repl(entry))
    result.tactics = [tactic_from_repl(t) for t in response.tactics]
    if isinstance(response.declarations, list):
        result.declarations = response.declarations
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


def apply_axiom_check(
    result: VerifyResult, after: Response | None, allowed: frozenset[str] = STANDARD_AXIOMS
) -> None:
    """Reads every `#print axioms` answer in `after` (names not matched: use
    `check_axiom_answers` where the asked names are known)."""
    if after is None:
        return
    answers = [answer for m in after.messages if (answer := axiom_answer(m.data)) is not None]
    used = {axiom for _name, axioms in answers for axiom in axioms}
    result.axioms = sorted(used)
    _judge_axioms(result, used, allowed)


def check_axiom_answers(
    result: VerifyResult,
    after: Response | None,
    names: list[str],
    allowed: frozenset[str] = STANDARD_AXIOMS,
) -> None:
    """The check_axioms verdict: each asked name's own answer, then the rules.

    An answer counts only for the declaration it names (primes, `«»`,
    namespaces compared atom by atom); a VALID stands only if every asked
    name got its answer and no answer uses an axiom outside `allowed`
    (exact names). `sorryAx` makes it SORRY, anything else REJECTED. Fails
    closed: an error, a missing answer or an answer for another name is REJECTED.
    """
    atoms_of = {name: name_atoms(name) for name in names}  # each name read once
    asked = set(atoms_of.values())
    messages = after.messages if after is not None else []
    answered: set[tuple[str, ...]] = set()
    used: set[str] = set()
    for message in messages:
        answer = axiom_answer(message.data)
        if answer is None:
            continue
        atoms = name_atoms(answer[0])
        if atoms not in asked:
            continue
        answered.add(atoms)
        used.update(answer[1])
    result.axioms = sorted(used)
    if result.status is not Status.VALID or not names:
        return
    _judge_axioms(result, used, allowed)
    if result.status is not Status.VALID:
        return
    errors = [m.data for m in messages if m.severity == "error"]
    missing = [name for name in names if atoms_of[name] not in answered]
    if after is None or errors or missing:
        result.status = Status.REJECTED
        detail = "; ".join(errors)[:300] or f"no answer for {', '.join(missing)}"
        result.error = (
            f"check_axioms could not check every declaration ({', '.join(names)}): {detail}"
        )


def _judge_axioms(result: VerifyResult, used: set[str], allowed: frozenset[str]) -> None:
    if result.status is not Status.VALID:
        return
    if "sorryAx" in used:
        result.status = Status.SORRY
        return
    refused = used - allowed
    native = {axiom for axiom in refused if is_native_axiom(axiom)}
    if native:
        result.status = Status.REJECTED
        result.error = f"proof uses native_decide / compiler trust ({', '.join(sorted(native))})"
    elif refused:
        result.status = Status.REJECTED
        result.error = f"proof uses non-standard axioms: {', '.join(sorted(refused))}"


# Lean >= 4.29: `native_decide` adds one axiom per use, `<decl>._native.native_decide.ax_<n>`.
_NATIVE_DECIDE_AXIOM = re.compile(r".+\._native\.native_decide\.ax_\d+(?:_\d+)*")


def is_native_axiom(name: str) -> bool:
    """Whether `name` is a native-evaluation axiom (either spelling; only names the refusal)."""
    return name in NATIVE_AXIOMS or _NATIVE_DECIDE_AXIOM.fullmatch(name) is not None


# "'n' depends on axioms: [...]" or "'n' does not depend on any axioms". The
# name is everything between the first quote and the quote before the tail,
# so `'foo''` (a primed name) and `'«a b».c'` read whole.
_ANSWER = re.compile(
    r"'(?P<name>.+)' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|(?P<none>does not depend on any axioms))\s*",
    re.S,
)


def axiom_answer(text: str) -> tuple[str, list[str]] | None:
    """(name, axioms) of one `#print axioms` answer, None for any other message."""
    match = _ANSWER.fullmatch(text.strip())
    if match is None:
        return None
    if match.group("none") is not None:
        return match.group("name"), []
    return match.group("name"), [a.strip() for a in match.group("axioms").split(",") if a.strip()]


_ATOM = re.compile(r"«(?P<quoted>[^»]*)»|(?P<plain>[^.«]+)")
_PREFIXES = ("_root_", "_private")  # a leading atom name_atoms reads further


def name_atoms(name: str) -> tuple[str, ...]:
    """A Lean name as its atoms: `«a b».c` and `a b` quoted or not compare by atom,
    so `«a.b»` (one atom) is not `a.b` (two).

    A private name reads as the name its user wrote (Lean's
    `privateToUserName?`, src/Lean/PrivateName.lean): `#print axioms p` of a
    `private theorem p` answers about `_private.<Module>.0.p`
    (`mkPrivateNameCore`: `_private`, the main module's atoms, the number 0,
    then the name; the REPL's main module is anonymous, `_private.0.p`). The
    number is a `Name.num`, printed bare; no identifier a user writes has a
    bare numeric atom (`«0»` is quoted), so no user name reads as private.
    A name with no `«` and neither prefix (nearly every name asked and
    answered) is its dot-separated runs: the regex reads it the same way."""
    if "«" not in name:
        atoms = tuple(atom for atom in name.strip().split(".") if atom)
        if not atoms or atoms[0] not in _PREFIXES:
            return atoms
    return _read_atoms(name)


def _read_atoms(name: str) -> tuple[str, ...]:
    """name_atoms by the regex, for every name (tests/axioms compare the two)."""
    parts = [
        (m.group("quoted") is not None, m.group("quoted") or m.group("plain") or "")
        for m in _ATOM.finditer(name.strip())
    ]
    if parts and parts[0] == (False, "_root_"):
        parts = parts[1:]
    if parts and parts[0] == (False, "_private"):
        for i, (quoted, text) in enumerate(parts[1:], 1):
            if not quoted and text.isascii() and text.isdigit():
                if text == "0":
                    parts = parts[i + 1 :]
                break
    return tuple(text for _quoted, text in parts)


def require_every_axiom_check(
    result: VerifyResult, after: Response | None, names: list[str]
) -> None:
    """Fail closed: a VALID stands only if `#print axioms` answered for every name
    (kept for callers that read answers with `apply_axiom_check`)."""
    if result.status is not Status.VALID or not names:
        return
    asked = {name_atoms(name) for name in names}
    messages = after.messages if after is not None else []
    answered = {
        name_atoms(a[0]) for m in messages if (a := axiom_answer(m.data)) is not None
    } & asked
    errors = [m.data for m in messages if m.severity == "error"]
    if after is None or errors or len(answered) < len(asked):
        result.status = Status.REJECTED
        detail = "; ".join(errors)[:300] or f"{len(answered)} of {len(asked)} answered"
        result.error = (
            f"check_axioms could not check every declaration ({', '.join(names)}): {detail}"
        )


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
        raw = ReplSorry(
            pos=_dict_pos(raw.get("pos")),
            end_pos=_dict_pos(raw.get("endPos")),
            goal=str(raw.get("goal", "")),
        )
    return SorryInfo(start=_position(raw.pos), end=_position(raw.end_pos), goal=raw.goal)


def _is_root_goal(entry: ReplSorry) -> bool:
    """A `rootGoals` entry: a position of zero width (REPL-PROTOCOL.md 4.2)."""
    return entry.pos is not None and entry.end_pos is not None and entry.pos == entry.end_pos


def tactic_from_repl(raw: ReplTactic) -> TacticInfo:
    """One `allTactics` entry (REPL-PROTOCOL.md 5.4) as a result `TacticInfo`."""
    return TacticInfo(
        text=raw.tactic,
        start=_position(raw.pos),
        end=_position(raw.end_pos),
        goals=raw.goals,
        used_constants=list(raw.used_constants),
    )


def _dict_pos(pos: dict | None) -> Pos | None:
    return None if not pos else Pos(int(pos.get("line", 0)), int(pos.get("column", 0)))
