"""check_axioms for Verify and sessions: on by default, answers matched by name.

Owns: whether a request checks axioms (`axioms_on`: the request's explicit
choice, else `[axioms] check`), the plan of one body (`plan`: every
proof-carrying declaration found by core.declarations, anonymous ones
renamed), the command asked after it (`after_command`: a name the
reference query already asks about is not asked twice) and the verdict of
its `#print axioms` answers (`finish`: each answer matched to the name
asked, exact allow-list `[axioms] allowed`; read by
repl.check_axiom_answers). Verify and sessions both use this room, so
neither calls the other's internals. A body the one lexer (core.lexer)
cannot read for certain has no plan (`Unreadable`, fail closed): its
declarations are not guessed by another reading. May import: config, core,
errors, repl, results. Never imports edge, pool or `*_pb2`.
"""

from __future__ import annotations

from .. import repl
from ..config import Config
from ..core.declarations import AxiomCheck, plan_axiom_check, print_axioms_command
from ..core.lexer import LexError, line_col
from ..errors import RequestError
from ..results import Position, VerifyResult

__all__ = ["AxiomCheck", "Unreadable", "after_command", "axioms_on", "finish", "plan"]


class Unreadable(RequestError):
    """check_axioms cannot plan a body the lexer cannot read for certain."""


def axioms_on(options, config: Config) -> bool:
    """A request's check_axioms; None means the server's `[axioms] check`."""
    choice = getattr(options, "check_axioms", None)
    return config.axioms.check if choice is None else bool(choice)


def plan(body: str, first_line: int = 1, first_column: int = 0) -> AxiomCheck:
    """The body to run and the names to ask `#print axioms` about;
    Unreadable where the lexer cannot read the body for certain."""
    try:
        return plan_axiom_check(body, first_line, first_column)
    except LexError as error:
        line, column = line_col(body, error.offset)
        if line == 1:
            column += first_column
        raise Unreadable(
            f"check_axioms: the text cannot be read for certain as Lean reads it "
            f"({error.reason}) at line {first_line + line - 1}, column {column}, so its "
            "declarations cannot be found for `#print axioms`"
        ) from None


def after_command(check: AxiomCheck, reference_names=()) -> str | None:
    """The `#print axioms` command run right after the body, or None.

    With a reference, the statement query (reference.query_command) asks
    `#print axioms` of every reference name on the same env, right after this
    command; a checked name that is one of them (same atoms) is not asked
    twice, and `finish` takes its answer from that query's response."""
    shared = _shared(check, reference_names)
    if not shared:  # not pinned (most requests): every name is asked, none read into atoms
        return print_axioms_command(check.names)
    return print_axioms_command([n for n in check.names if repl.name_atoms(n) not in shared])


def finish(
    result: VerifyResult, outcome, check: AxiomCheck, config: Config, reference_names=()
) -> None:
    """Positions back in the user's text, then the verdict of the `#print axioms` answers.

    `reference_names`: the same as given to `after_command`. The answers for
    the names it left out are the statement query's `#print axioms` answers
    for those names, and only those: the query's other lines and errors are
    the reference check's. A name answered nowhere is missing, so REJECTED."""
    _restore_positions(result, check)
    if outcome is None:
        return
    after = outcome.after_response
    after = None if after is None else repl.as_response(after)
    shared = _shared(check, reference_names)
    if shared:
        query = outcome.reference_response
        borrowed = [] if query is None else _answers_for(repl.as_response(query), shared)
        if after is not None:
            after = repl.Response(env=after.env, messages=[*after.messages, *borrowed])
        elif query is not None:
            after = repl.Response(messages=borrowed)
    repl.check_axiom_answers(result, after, check.names, frozenset(config.axioms.allowed))


def _shared(check: AxiomCheck, reference_names) -> set[tuple[str, ...]]:
    if not reference_names:  # not pinned (most requests): no name is read into atoms
        return set()
    asked = {repl.name_atoms(name) for name in reference_names}
    return {repl.name_atoms(name) for name in check.names} & asked


def _answers_for(response, shared: set[tuple[str, ...]]) -> list:
    """The response's `#print axioms` answers about the shared names."""
    out = []
    for message in response.messages:
        answer = repl.axiom_answer(message.data)
        if answer is not None and repl.name_atoms(answer[0]) in shared:
            out.append(message)
    return out


def _restore_positions(result: VerifyResult, check: AxiomCheck) -> None:
    """Maps positions in a body renamed for check_axioms back to the user's text."""
    for item in [*result.messages, *result.sorries]:
        for attr in ("start", "end"):
            pos = getattr(item, attr)
            if pos is not None:
                setattr(item, attr, Position(*check.original_position(pos.line, pos.column)))
