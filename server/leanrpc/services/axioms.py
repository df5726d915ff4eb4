"""check_axioms for Verify and sessions: on by default, answers matched by name.

Owns: whether a request checks axioms (`axioms_on`: the request's explicit
choice, else `[axioms] check`), the plan of one body (`plan`: every
proof-carrying declaration found by core.declarations, anonymous ones
renamed) and the verdict of its `#print axioms` answers (`finish`: each
answer matched to the name asked, exact allow-list `[axioms] allowed`; read by
repl.check_axiom_answers). Verify and sessions both use this room, so
neither calls the other's internals. May import: config, core, repl,
results. Never imports edge, pool or `*_pb2`.
"""

from __future__ import annotations

from .. import repl
from ..config import Config
from ..core.declarations import AxiomCheck, plan_axiom_check
from ..results import Position, VerifyResult

__all__ = ["AxiomCheck", "axioms_on", "finish", "plan"]


def axioms_on(options, config: Config) -> bool:
    """A request's check_axioms; None means the server's `[axioms] check`."""
    choice = getattr(options, "check_axioms", None)
    return config.axioms.check if choice is None else bool(choice)


def plan(body: str, first_line: int = 1, first_column: int = 0) -> AxiomCheck:
    """The body to run and the names to ask `#print axioms` about."""
    return plan_axiom_check(body, first_line, first_column)


def finish(result: VerifyResult, outcome, check: AxiomCheck, config: Config) -> None:
    """Positions back in the user's text, then the verdict of the `#print axioms` answers."""
    _restore_positions(result, check)
    if outcome is not None:
        after = outcome.after_response
        repl.check_axiom_answers(
            result,
            None if after is None else repl.as_response(after),
            check.names,
            frozenset(config.axioms.allowed),
        )


def _restore_positions(result: VerifyResult, check: AxiomCheck) -> None:
    """Maps positions in a body renamed for check_axioms back to the user's text."""
    for item in [*result.messages, *result.sorries]:
        for attr in ("start", "end"):
            pos = getattr(item, attr)
            if pos is not None:
                setattr(item, attr, Position(*check.original_position(pos.line, pos.column)))
