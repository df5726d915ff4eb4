"""With a reference and check_axioms both on, `#print axioms` is asked once per name.

The statement query (reference.query_command) asks `#print axioms` of every
reference name on the snippet's env; the axiom check's own command then asks
only the names the query does not (helper lemmas), and its verdict takes the
query's answers for the others (services.axioms). These tests check that the
REPL is asked once, that the verdict still rests on an answer for every
checked name, and that it fails closed when the query's answer is missing,
names another declaration, or never came.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from leanrpc import repl
from leanrpc.config import Config
from leanrpc.core.declarations import AxiomCheck
from leanrpc.results import Status, VerifyResult
from leanrpc.services import axioms
from leanrpc.worker.worker import Worker
from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

STANDARD = "[propext, Classical.choice, Quot.sound]"


def _check(*names: str) -> AxiomCheck:
    return AxiomCheck(body="", names=list(names), edits=[])


def _answers(*texts: str, errors: tuple[str, ...] = ()) -> dict:
    messages = [{"severity": "info", "data": text} for text in texts]
    messages += [{"severity": "error", "data": text} for text in errors]
    return {"env": 3, "messages": messages}


def _verdict(check, after, query, reference_names=("target",)) -> VerifyResult:
    result = VerifyResult(id="s", status=Status.VALID)
    outcome = SimpleNamespace(after_response=after, reference_response=query)
    axioms.finish(result, outcome, check, Config(), list(reference_names))
    return result


def test_the_axiom_command_leaves_out_the_names_the_statement_query_asks():
    check = _check("helper", "target", "Foo.«bar»")
    assert axioms.after_command(check) == (
        "#print axioms _root_.helper\n#print axioms _root_.target\n#print axioms _root_.Foo.«bar»"
    )
    assert axioms.after_command(check, ["target"]) == (
        "#print axioms _root_.helper\n#print axioms _root_.Foo.«bar»"
    )
    # Names compare atom by atom, as the answers are matched: `«bar»` is `bar`.
    assert axioms.after_command(check, ["target", "Foo.bar"]) == "#print axioms _root_.helper"
    assert axioms.after_command(check, ["helper", "target", "Foo.bar"]) is None
    # `Foo.bar` (two atoms) is not `«Foo.bar»` (one): still asked.
    assert axioms.after_command(_check("Foo.bar"), ["«Foo.bar»"]) == "#print axioms _root_.Foo.bar"


def test_the_verdict_takes_the_statement_querys_answer_for_a_shared_name():
    check = _check("helper", "target")
    after = _answers(f"'helper' depends on axioms: {STANDARD}")
    query = _answers(
        "target : 2 + 2 = 4",  # the query's #check line: not an axiom answer
        "'target' depends on axioms: [propext]",
    )
    result = _verdict(check, after, query)
    assert result.status is Status.VALID, result.error
    assert result.axioms == ["Classical.choice", "Quot.sound", "propext"]


def test_a_forbidden_axiom_in_the_borrowed_answer_rejects():
    check = _check("helper", "target")
    after = _answers("'helper' does not depend on any axioms")
    query = _answers("'target' depends on axioms: [propext, cheat]")
    result = _verdict(check, after, query)
    assert result.status is Status.REJECTED
    assert "cheat" in result.error
    sorry = _verdict(check, after, _answers("'target' depends on axioms: [sorryAx]"))
    assert sorry.status is Status.SORRY


def test_every_name_shared_and_the_query_answers_all():
    result = _verdict(_check("target"), None, _answers("'target' does not depend on any axioms"))
    assert result.status is Status.VALID, result.error
    assert result.axioms == []


@pytest.mark.parametrize(
    "query",
    [
        None,  # the query never ran
        _answers("target : 2 + 2 = 4"),  # no `#print axioms` answer in it
        _answers("'other' depends on axioms: [propext]"),  # an answer about another name
        _answers("'target.aux' depends on axioms: [propext]"),  # nor a longer one
    ],
    ids=["no query", "no answer", "another name", "a longer name"],
)
def test_no_answer_for_a_shared_name_fails_closed(query):
    for after in (None, _answers("'helper' does not depend on any axioms")):
        check = _check("helper", "target") if after is not None else _check("target")
        result = _verdict(check, after, query)
        assert result.status is Status.REJECTED, (query, after)
        assert "target" in result.error


def test_the_querys_other_answers_do_not_count_for_names_it_was_not_asked_for():
    # `helper` is not a reference name: only the axiom command's answer counts for it,
    # even if the query's response happens to carry one.
    check = _check("helper", "target")
    query = _answers(
        "'helper' does not depend on any axioms", "'target' does not depend on any axioms"
    )
    result = _verdict(check, _answers(), query)
    assert result.status is Status.REJECTED
    assert "no answer for helper" in result.error


def test_errors_of_the_axiom_command_still_reject():
    check = _check("helper", "target")
    after = _answers(errors=("unknown constant 'helper'",))
    query = _answers("'target' does not depend on any axioms")
    result = _verdict(check, after, query)
    assert result.status is Status.REJECTED
    assert "unknown constant" in result.error


HEADER = "import Mathlib\n\n"
REFERENCE = HEADER + "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  sorry\n"
SNIPPET = HEADER + (
    "lemma helper : 4 = 4 := rfl\n\n"
    "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  exact helper\n"
)


async def test_the_repl_is_asked_once_per_name(monkeypatch):
    """Through the real server on the stand-in: every command a worker sends is recorded."""
    sent: list[str] = []
    request, request_batch = Worker.request, Worker.request_batch

    async def recording_request(self, payload, timeout):
        sent.append(getattr(payload, "cmd", ""))
        return await request(self, payload, timeout)

    async def recording_batch(self, payloads, timeout, total=None):
        sent.extend(getattr(p, "cmd", "") for p in payloads)
        return await request_batch(self, payloads, timeout, total)

    monkeypatch.setattr(Worker, "request", recording_request)
    monkeypatch.setattr(Worker, "request_batch", recording_batch)
    async with running_server() as (_app, client):
        [pinned] = await client.verify_batch([SNIPPET], references=[REFERENCE])
        assert pinned.status == "VALID", (pinned.error, pinned.reference)
        assert pinned.reference.passed
        assert set(pinned.axioms) <= set(repl.STANDARD_AXIOMS)
        asked = [line for cmd in sent for line in cmd.splitlines() if "#print axioms" in line]
        # The reference's own elaboration asks once, the snippet's query once,
        # the axiom command only for the helper.
        assert asked.count("#print axioms _root_.target") == 2, asked  # the query's exact name
        assert asked.count("#print axioms _root_.helper") == 1, asked
        # Without the reference, the axiom command asks both.
        sent.clear()
        [plain] = await client.verify_batch([SNIPPET])
        assert plain.status == "VALID"
        asked = [line for cmd in sent for line in cmd.splitlines() if "#print axioms" in line]
        assert sorted(asked) == ["#print axioms _root_.helper", "#print axioms _root_.target"]
