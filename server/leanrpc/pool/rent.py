"""The rent book as one routing plan reads and changes it (ski rental).

A job that waits for a busy worker holding more of its work (a longer prefix,
or its import header) while another worker idles pays "rent": the idle time,
charged to a key (the prefix, or the header). Once the rent reaches what the
work would cost on the idle worker, routing spends it and the idle worker
takes the job (pool/routing.py). The pool keeps the book between plans
(pool/dispatch.py `RentBook`); a plan only reads the snapshot's copy and
records its changes in `Plan.rent`.

Owns: `PlanRent` (a plan's view of the book: `accrue`, `rent`, `mark`,
`spend`), `RENT_ENTRIES` and `header_key`. May import: pool.plan only.
"""

from __future__ import annotations

from .plan import JobView, Mark, Plan, Snapshot

__all__ = ["RENT_ENTRIES", "PlanRent", "header_key"]

# Keys whose accumulated waiting ("rent") is kept, most recent kept.
RENT_ENTRIES = 1024


def header_key(import_key: str) -> int:
    """The rent key of waits on a header's holders (prefix keys hash a pair
    (scope, text); a triple is never equal to one of those)."""
    return hash(("header", import_key, None))


class PlanRent:
    """The book as it will be once the plan applies: what the plan charged
    (`paid`), spent, and pushed out of the book's bound."""

    def __init__(self, snapshot: Snapshot, plan: Plan) -> None:
        self.s = snapshot
        self.plan = plan
        self.paid: dict[int, float] = {}
        self.spent: set[int] = set()
        self.evicted: set[int] = set()

    def mark(self, job: JobView) -> Mark | None:
        """The job's wait mark as this plan leaves it."""
        changed = self.plan.rent.marks
        return changed[job] if job in changed else self.s.marks.get(job)

    def rent(self, key: int) -> float:
        """The rent paid for a key as the book will hold it once this plan applies."""
        if key in self.spent or key in self.evicted:
            return 0.0
        return self.s.rent.get(key, 0.0) + self.paid.get(key, 0.0)

    def spend(self, key: int) -> None:
        """The key's rent bought the work on an idle worker: it starts again from 0."""
        self.spent.add(key)
        self.plan.rent.spent.append(key)

    def accrue(self, pending: list[JobView], now: float) -> None:
        """Charges each job that waited with an idle worker passed over since
        the last plan to its key's rent."""
        marks = self.s.marks
        if not marks:
            return  # nobody waited for a holder (the common case): one check, no walk
        change = self.plan.rent
        for job in pending:
            mark = marks.get(job)  # nothing changed it yet in this plan
            if mark is None or mark.since is None:
                continue
            waited = max(0.0, now - mark.since)
            change.marks[job] = Mark(None, mark.key, mark.header)
            if mark.header:
                self.plan.stats.header_wait_s += waited
            else:
                self.plan.stats.prefix_wait_s += waited
            change.paid.append((mark.key, waited))
            self.paid[mark.key] = self.paid.get(mark.key, 0.0) + waited
        # The book keeps the newest RENT_ENTRIES keys: charged keys move to the
        # end, so the oldest untouched ones are what it drops.
        excess = len(self.s.rent) + sum(1 for k in self.paid if k not in self.s.rent) - RENT_ENTRIES
        if excess > 0:
            for key in self.s.rent:
                if excess <= 0:
                    break
                if key not in self.paid:
                    self.evicted.add(key)
                    excess -= 1
