"""The byte budget for requests in flight, per peer and server-wide, for every door.

Owns: counting the bytes each peer's requests hold while they are read and
served, and refusing the bytes that would take a peer past
`memory.in_flight_mb_per_peer` or the server past `memory.in_flight_mb`
(issue 44 item 1), with one refusal text that names which. A refusal is an
`OverloadedError` (RESOURCE_EXHAUSTED with RetryInfo on gRPC through
edge/errors.py; 503 with Retry-After on REST), raised *before* the bytes are
read further, so nothing is held for a refused request.

The API is two calls, so any door can use it:

    budget.acquire(peer, n)     # raises BudgetExceeded; nothing counted then
    ...                         # read n more bytes, or hold them
    budget.release(peer, n)     # every acquired byte, exactly once

`Ticket` is the per-request tally doors use (acquire as bytes arrive,
`close()` releases all). The REST gateway charges in gateway/intake.py
(aiohttp middleware, every route), gRPC in edge/interceptors/budget.py (the
raw message bytes, before they are deserialized). One ByteBudget serves every
door: app.py makes it (`App.budget`) and hands it to each. The MCP door wires
it the same way: on aiohttp, add `gateway.intake.intake_middleware(app.budget,
config, refuse_access)` to its application as is; on starlette, a pure ASGI
middleware that takes `budget.ticket(client host)`, wraps `receive` so each
`http.request` message's body is `ticket.acquire`d before it is passed on
(on BudgetExceeded: answer 503 with Retry-After and stop passing bytes on),
and closes the ticket once the last `http.response.body` is sent.

Plain Python, no I/O, no clock. May import: the standard library, leanrpc.errors.
"""

from __future__ import annotations

import collections

from ..errors import OverloadedError

__all__ = ["BudgetExceeded", "ByteBudget", "Ticket", "decoded_bound"]

_MB = 2**20


class BudgetExceeded(OverloadedError):
    """`n` more bytes would take `scope` ("peer" or "server") past its budget."""

    def __init__(self, scope: str, held: int, incoming: int, limit: int, key: str) -> None:
        self.scope = scope
        what = (
            "this peer's requests in flight hold"
            if scope == "peer"
            else "all requests in flight hold"
        )
        super().__init__(
            f"{what} {held / _MB:.1f} MB; {incoming / _MB:.1f} MB more is over the {scope} budget of "
            f"{limit / _MB:g} MB ({key}); retry when some have finished",
            retry_after_s=1.0,
        )


class ByteBudget:
    """At most `per_peer` bytes held per peer and `total` in all (0: no limit)."""

    def __init__(self, per_peer: int, total: int) -> None:
        self.per_peer = per_peer
        self.total = total
        self.held: collections.Counter[str] = collections.Counter()
        self.held_total = 0
        self.refused = collections.Counter()  # scope -> refusals, for tests and metrics

    @classmethod
    def from_config(cls, config) -> "ByteBudget":
        """`[memory] in_flight_mb_per_peer, in_flight_mb`."""
        return cls(
            config.memory.in_flight_mb_per_peer * _MB,
            config.memory.in_flight_mb * _MB,
        )

    def refusal(self, peer: str, n: int) -> BudgetExceeded | None:
        """Why `n` more bytes for `peer` would be refused, or None."""
        if self.per_peer and self.held[peer] + n > self.per_peer:
            return BudgetExceeded(
                "peer", self.held[peer], n, self.per_peer, "memory.in_flight_mb_per_peer"
            )
        if self.total and self.held_total + n > self.total:
            return BudgetExceeded("server", self.held_total, n, self.total, "memory.in_flight_mb")
        return None

    def acquire(self, peer: str, n: int) -> None:
        """Counts `n` bytes for `peer`; raises BudgetExceeded (nothing counted) past a budget."""
        refused = self.refusal(peer, n)
        if refused is not None:
            self.refused[refused.scope] += 1
            raise refused
        self.held[peer] += n
        self.held_total += n

    def release(self, peer: str, n: int) -> None:
        self.held[peer] -= n
        self.held_total -= n
        if self.held[peer] <= 0:
            del self.held[peer]

    def ticket(self, peer: str) -> "Ticket":
        return Ticket(self, peer)


class Ticket:
    """One request's bytes: `acquire` as they arrive, `close` gives all back (idempotent)."""

    __slots__ = ("_budget", "peer", "held")

    def __init__(self, budget: ByteBudget, peer: str) -> None:
        self._budget = budget
        self.peer = peer
        self.held = 0

    def acquire(self, n: int) -> None:
        self._budget.acquire(self.peer, n)
        self.held += n

    def close(self) -> None:
        if self.held:
            self._budget.release(self.peer, self.held)
            self.held = 0

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# Lead bytes of 4-byte UTF-8 characters, found with a substring search (`in`,
# C speed: a few us for an 8 KB miniF2F body).
_ASTRAL_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")


def decoded_bound(data, *, json: bool = True) -> int:
    """The most the Python strings decoded from `data` can hold, in bytes.

    A str is 1, 2 or 4 bytes a character by its widest character: ASCII
    decodes to at most its own size, text whose widest character is in the
    BMP to at most 2x (a 3-byte UTF-8 character is 2 bytes, but every ASCII
    character beside it is 2 too), and one 4-byte character makes every
    character of its string 4 bytes: 4x. In JSON (`json`), a body with `\\u`
    escapes is bounded at 4x: one could be half of a surrogate pair, and
    telling which costs 30-140 us per 8 KB body (a regex or a search for
    each spelling, slowed by the many other escapes) against about 2 us.
    Read from the bytes with C-speed scans, before anything is decoded.
    """
    if json and b"\\u" in data:
        return 4 * len(data)
    if data.isascii():
        return len(data)
    return len(data) * (4 if any(lead in data for lead in _ASTRAL_LEADS) else 2)
