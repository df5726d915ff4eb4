"""The REPL's id counters: which frame can be the answer to which command.

Owns: `Ledger`, the env id and the proof-state ids the REPL must allocate
next (REPL-PROTOCOL.md section 6: new ids are the next ones, in order), and
the kind rule (a tactic is never answered with an env, a command never with
a proof state of its own; no real answer has both). Each check counts an
answer and returns what is wrong with it, or None; the channel
(worker/channel.py) poisons the worker on anything wrong. An answer out of
its place names an id that is not the next one, so the counters catch a
frame answered by someone else, or out of order, in a batch as in a single
exchange. May import: leanrpc.repl.
"""

from __future__ import annotations

from .. import repl

__all__ = ["Ledger", "brief"]


class Ledger:
    """The ids one REPL process has allocated so far."""

    def __init__(self) -> None:
        self.next_env = 0  # the env id the REPL must allocate next
        # The proofState id it must allocate next; None once a request asked
        # for rootGoals (ids we do not decode), so unchecked from then on.
        self.next_proof_state: int | None = 0

    def kind(self, request, response: repl.Response) -> str | None:
        """What is wrong with the answer's kind for its command (a batch checks it
        frame by frame: the frame is another command's)."""
        if response.env is not None and response.proof_state is not None:
            return f"an answer with both an env and a proof state: {brief(response)}"
        tactic = isinstance(request, repl.TacticRequest) or (
            isinstance(request, dict) and "tactic" in request
        )
        command = isinstance(request, repl.CommandRequest) or (
            isinstance(request, dict) and "cmd" in request
        )
        if (tactic and response.env is not None) or (command and response.proof_state is not None):
            return f"an answer of the wrong kind for its command (out of order?): {brief(response)}"
        return None

    def env(self, request, response: repl.Response) -> str | None:
        """Counts a command's new env; what is wrong if it is not the next one."""
        if response.env is None or _is_tactic(request):
            return None
        if response.env != self.next_env:
            return (
                f"the REPL allocated env {response.env}, but {self.next_env} commands were sent "
                "(a command was answered by someone else, or out of order)"
            )
        self.next_env += 1
        return None

    def proof_states(self, request, response: repl.Response) -> str | None:
        """Counts the answer's new proof states; what is wrong if they are not the
        next ones, in order (an answer naming a state the REPL never allocated,
        or an old one as new, is not its own)."""
        if _asks_root_goals(request):
            self.next_proof_state = None
        if self.next_proof_state is None:
            return None
        given = _new_proof_states(response)
        expected = list(range(self.next_proof_state, self.next_proof_state + len(given)))
        if given != expected:
            return (
                f"the REPL answered with proof state(s) {given[:8]}, but the next it could allocate "
                f"were {expected[:8]} (a state it was never given)"
            )
        self.next_proof_state += len(given)
        return None


def _is_tactic(request) -> bool:
    if isinstance(request, dict):
        return "tactic" in request or "pickleTo" in request
    return isinstance(request, (repl.TacticRequest, repl.PickleRequest))


def _asks_root_goals(request) -> bool:
    if isinstance(request, dict):
        return bool(request.get("rootGoals"))
    return bool(getattr(request, "root_goals", False))


def _new_proof_states(response: repl.Response) -> list:
    """The proofState ids an answer allocates, in the REPL's order: sorries,
    then tactics entries, then the answer's own (section 6)."""
    ids: list = [s.proof_state for s in response.sorries if s.proof_state is not None]
    ids += [
        t["proofState"]
        for t in response.tactics
        if isinstance(t, dict) and t.get("proofState") is not None
    ]
    if response.proof_state is not None:
        ids.append(response.proof_state)
    return ids


def brief(response: repl.Response) -> str:
    """An answer, cut short for a log line or an error."""
    return repr(response.to_dict())[:200]
