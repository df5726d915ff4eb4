"""pool/pipeline.py's rules without processes: which jobs ride, the env each
body's checks name, which answers belong to which body, whose failure it is."""

from __future__ import annotations

import asyncio

from leanrpc import repl
from leanrpc.core.headers import split_header
from leanrpc.errors import WorkerCrashed, WorkerOutOfMemory, WorkerPoisoned, WorkerTimeout
from leanrpc.pool.job import BodyJob
from leanrpc.pool.pipeline import Group, fits, may_lead, rider_limit
from leanrpc.pool.ticket import Ticket

HEADER = "import Mathlib\n\n"
_LOOP = asyncio.new_event_loop()  # futures only: nothing runs on it


def _job(
    body: str, *, axioms: bool = True, timeout_s: float = 10, inline: bool = False, **fields
) -> BodyJob:
    """A body job; its checks are commands of their own unless `inline` (an infotree
    asked for keeps them apart: BodyJob.inline)."""
    if not inline:
        fields.setdefault("infotree", "original")
    return BodyJob(
        split=split_header(HEADER + body),
        timeout_s=timeout_s,
        after_body="#print axioms t" if axioms else None,
        stream_id="s",
        **fields,
    )


def _ticket(body: str, *, solo: bool = False, fresh_process: bool = False, **fields) -> Ticket:
    """A queued job's ticket (its bookkeeping: solo, fresh_process, its future)."""
    ticket = Ticket(_job(body, **fields), _LOOP.create_future(), 0.0)
    ticket.solo = solo
    if fresh_process:
        ticket.ask_fresh_process()
    return ticket


def test_the_checks_name_the_env_each_body_will_get():
    jobs = [_job("theorem a : True := trivial"), _job("theorem b : True := trivial", axioms=False)]
    jobs.append(_job("theorem c : True := trivial"))
    group = Group(jobs, first_env=5)
    assert group.predicted == [5, 7, 8]
    payloads = group.payloads(["A", "B", "C"])
    assert payloads[0] == "A" and payloads[2] == "B" and payloads[3] == "C"
    assert [payloads[1].env, payloads[4].env] == [5, 8]


def test_checks_riding_in_their_bodys_command_take_no_command_or_env_of_their_own():
    jobs = [_job(f"theorem t{i} : True := trivial", inline=True) for i in range(3)]
    jobs.append(_job("theorem r : True := trivial", inline=True, reference_query="#check @r"))
    assert all(job.inline and job.follow() for job in jobs)
    group = Group(jobs, first_env=5)
    assert group.predicted == [5, 6, 7, 8]
    assert group.payloads(["A", "B", "C", "D"]) == ["A", "B", "C", "D"]
    # Each body's command holds its checks, each on lines after the body's.
    text = jobs[3].sent_text()
    assert text.startswith(jobs[3].text) and text.endswith("\n#print axioms t\n#check @r")
    # An answer split back: the body's messages, each check's, placed as if on its own.
    at = text.split("\n").index("#print axioms t") + 1  # the first check's line
    response = repl.Response(
        env=8,
        messages=[
            repl.ReplMessage(
                severity="info", pos=repl.Pos(3, 0), data="'t' does not depend on any axioms"
            ),
            repl.ReplMessage(
                severity="info", pos=repl.Pos(at, 0), data="'t' does not depend on any axioms"
            ),
            repl.ReplMessage(severity="info", pos=repl.Pos(at + 1, 0), data="r : True"),
        ],
    )
    body, [after, reference] = jobs[3].split_answer(response)
    assert [m.pos.line for m in body.messages] == [3]  # a body's own "answer" stays its own
    assert [(m.pos.line, m.data) for m in after.messages] == [
        (1, "'t' does not depend on any axioms")
    ]
    assert [(m.pos.line, m.data) for m in reference.messages] == [(1, "r : True")]
    assert body.env == after.env == reference.env == 8


def test_a_body_refused_an_env_keeps_its_answer_and_the_next_goes_alone():
    jobs = [_job(f"theorem t{i} : True := trivial") for i in range(3)]
    group = Group(jobs, first_env=1)  # predicted 1, 3, 5
    answers = [
        repl.Response(env=1),
        repl.Response(messages=[]),  # the lead's check
        repl.Response(message="Lean error: refused"),  # body 1: no env
        repl.Response(message="unknown environment"),  # its check named env 3, not there yet
        repl.Response(env=3),  # body 2 got 3, its check named 5: not about it
        repl.Response(message="unknown environment"),
    ]
    pieces = group.split(answers, 0.0, [0.1 * (i + 1) for i in range(len(answers))])
    assert [p.in_step for p in pieces] == [True, True, False]
    assert [len(p.early) for p in pieces] == [1, 0, 0]
    assert pieces[1].response.message == "Lean error: refused"


def test_only_a_failure_in_the_leads_own_commands_is_the_leads():
    group = Group([_job("theorem a : True := trivial"), _job("theorem b : True := trivial")], 1)
    assert group.lead_failed(WorkerTimeout("t", batch_index=0))
    assert group.lead_failed(WorkerCrashed("c", batch_index=1))  # during the lead's check
    assert not group.lead_failed(WorkerCrashed("c", batch_index=2))  # during the rider
    assert not group.lead_failed(WorkerCrashed("c"))  # not known where: nobody's


def test_a_timeout_is_the_own_failure_of_the_body_whose_commands_waited():
    """Commands: a, its check (0, 1); b, no check (2); c, its check (3, 4); the fence (5)."""
    jobs = [_job("theorem a : True := trivial"), _job("theorem b : True := trivial", axioms=False)]
    group = Group([*jobs, _job("theorem c : True := trivial")], 1)
    owners = [group.owner(WorkerTimeout("t", batch_index=at)) for at in range(6)]
    assert owners == [0, 0, 1, 2, 2, None]  # at the fence every body had answered: nobody's
    # Not known whose: anything but a timeout, and a timeout not placed in the batch.
    assert group.owner(WorkerCrashed("c", batch_index=3)) is None
    assert group.owner(WorkerPoisoned("p", batch_index=3)) is None
    assert group.owner(WorkerOutOfMemory("m", batch_index=3)) is None  # grown by every body
    assert group.owner(WorkerTimeout("t")) is None


def test_who_may_ride():
    lead = _ticket("theorem a : True := trivial")
    assert may_lead(lead) and fits(lead, _ticket("theorem b : True := trivial"), "w1")
    assert not may_lead(_ticket("theorem a : True := trivial", solo=True))
    assert not may_lead(_ticket("theorem a : True := trivial", fresh_process=True))
    assert not fits(lead, _ticket("theorem b : True := trivial", solo=True), "w1")
    assert not fits(lead, _ticket("theorem b : True := trivial", fresh_process=True), "w1")
    assert not fits(lead, _ticket("theorem b : True := trivial", timeout_s=1), "w1")
    other = BodyJob(split=split_header("import Other\n\ntheorem b : True"), timeout_s=10)
    assert not fits(lead, Ticket(other, lead.future, 0.0), "w1")
    assert not fits(lead, _ticket("theorem b : True := trivial", avoid_worker="w1"), "w1")
    assert not fits(lead, _ticket("theorem b : True := trivial", retire_worker=True), "w1")
    answered = _ticket("theorem b : True := trivial")
    answered.future.cancel()  # its caller left: it waits for no answer
    assert not fits(lead, answered, "w1")


def test_a_lead_takes_its_share_of_its_stream():
    assert rider_limit(7, 14, 2) == 7
    assert rider_limit(7, 8, 8) == 1
    assert rider_limit(7, 0, 2) == 0
    assert rider_limit(0, 10, 1) == 0


class _Worker:
    """What take_riders reads of a worker."""

    def __init__(self, name: str, *, reserved: bool = False, profile: str = "") -> None:
        self.name, self.reserved, self.profile, self.alive = name, reserved, profile, True


def _queued(count: int):
    """A stream of `count` queued jobs, its first taken out as the dispatched lead."""
    from leanrpc.pool.admission import Admission

    admission = Admission(queue_limit=100)
    tickets = [_ticket(f"theorem t{i} : True := trivial") for i in range(count)]
    for ticket in tickets:
        admission.push(ticket)
    admission.take(tickets[0])
    return admission, tickets


def test_idle_workers_share_a_stream_and_busy_ones_take_none():
    from leanrpc.config import Config
    from leanrpc.pool.cost import BodyCostModel
    from leanrpc.pool.pipeline import take_riders

    config = Config()
    cost = BodyCostModel()  # nothing observed yet: only the count bounds a group
    most = config.pool.pipeline_bodies - 1
    here = _Worker("w1", reserved=True)  # the lead's worker, held for it
    # The other worker is idle: the stream is shared, about half each.
    admission, tickets = _queued(17)
    riders = take_riders(admission, [here, _Worker("w2")], config, cost, tickets[0], here)
    assert len(riders) == min(most, 8) and tickets[0] not in riders
    # The other worker is busy with another job: the lead takes a full group.
    admission, tickets = _queued(most + 5)
    busy = _Worker("w2", reserved=True)
    riders = take_riders(admission, [here, busy], config, cost, tickets[0], here)
    assert len(riders) == most
    # A worker of another profile is no share of this stream.
    admission, tickets = _queued(most + 5)
    other = _Worker("w3", profile="other")
    riders = take_riders(admission, [here, other], config, cost, tickets[0], here)
    assert len(riders) == most


def test_a_group_takes_no_more_riders_than_fit_its_time():
    from leanrpc.config import Config
    from leanrpc.pool.cost import BodyCostModel
    from leanrpc.pool.pipeline import take_riders, within_time

    config = Config()
    config.pool.pipeline_group_s = 1.0
    here = _Worker("w1", reserved=True)
    cost = BodyCostModel()
    for _ in range(3):
        cost.observe(0.3, len(_ticket("theorem t1 : True := trivial").job.text))
    # Bodies of about 0.3 s: the lead and two riders fit a second, a third does not.
    admission, tickets = _queued(10)
    riders = take_riders(admission, [here], config, cost, tickets[0], here)
    assert riders == tickets[1:3]
    assert len(admission) == 7  # the others wait for the next group
    # Fast bodies: the count bounds the group again.
    fast = BodyCostModel()
    fast.observe(0.002, 30)
    admission, tickets = _queued(40)
    riders = take_riders(admission, [here], config, fast, tickets[0], here)
    assert len(riders) == config.pool.pipeline_bodies - 1
    # A lead over the time alone takes no rider; one that fits skips a rider too long for it.
    slow = BodyCostModel()
    slow.observe(2.0, 30)
    assert not within_time(slow, 1.0, tickets[0])(tickets[1])
    short, long = (
        _ticket("theorem s : True := trivial"),
        _ticket("theorem l : True := by\n" + "  trivial\n" * 300),
    )
    model = BodyCostModel()
    model.observe(0.1, len(short.job.text))
    model.observe(0.9, len(long.job.text))
    model.observe(0.1, len(short.job.text))
    in_time = within_time(model, 1.0, short)
    assert model.seconds(len(long.job.text)) > 0.9 - model.seconds(len(short.job.text))
    assert (in_time(long), in_time(short)) == (False, True)
