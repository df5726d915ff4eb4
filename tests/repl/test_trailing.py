"""repl/trailing.py: checks riding in a body's command, and their answers cut back by position
(docs/SECURITY.md, "Checks in the body's command")."""

from __future__ import annotations

import pytest

from leanrpc import repl
from leanrpc.repl.trailing import append, split, starts

ANSWER = "'t' does not depend on any axioms"


def _message(line, data, *, severity="info", column=0, end=None):
    return repl.ReplMessage(
        severity=severity,
        pos=None if line is None else repl.Pos(line, column),
        end_pos=None if end is None else repl.Pos(*end),
        data=data,
    )


@pytest.mark.parametrize(
    "body",
    ["", "theorem t : True := trivial", "theorem t : True := trivial\n", "\n\nx\n\n", "a\r\nb"],
)
def test_each_check_starts_on_the_line_append_says(body):
    checks = ["#print axioms t", "set_option pp.all true in #check @_root_.t\n#print axioms u"]
    text, first = append(body, checks), starts(body, checks)
    lines = text.split("\n")  # Lean ends a line at `\n` only
    assert text.startswith(body) and len(first) == 2
    assert lines[first[0] - 1] == "#print axioms t"
    assert lines[first[1] - 1].startswith("set_option pp.all")
    assert lines[first[1]] == "#print axioms u"
    assert all(line.strip() != "#print axioms t" for line in lines[: first[0] - 1])


def test_a_message_before_the_checks_is_the_bodys_even_when_it_reads_as_an_answer():
    at = starts("theorem t : True := by\n  trivial", ["#print axioms t"])
    assert at == [3]
    response = repl.Response(
        env=4,
        messages=[
            _message(2, ANSWER),  # the body's own (a trace, its own #print): never the check's
            _message(3, "'t' depends on axioms: [sorryAx]"),
        ],
    )
    body, [check] = split(response, at)
    assert [m.data for m in body.messages] == [ANSWER]
    assert [(m.pos.line, m.data) for m in check.messages] == [
        (1, "'t' depends on axioms: [sorryAx]")
    ]
    assert body.env == check.env == 4


def test_messages_on_the_checks_lines_are_theirs_renumbered_and_errors_there_too():
    at = starts("a\nb\n", ["#print axioms t", "q1\nq2\nq3"])
    assert at == [3, 4]
    response = repl.Response(
        env=9,
        messages=[
            _message(3, "unexpected token '#print'", severity="error", column=0, end=(3, 6)),
            _message(5, "second line of the query", column=26, end=(5, 40)),
            _message(9, "past the end: the last check's", severity="error"),
        ],
    )
    body, [after, query] = split(response, at)
    assert body.messages == []
    assert [(m.severity, m.pos.line, m.end_pos.line) for m in after.messages] == [("error", 1, 1)]
    assert [(m.pos.line, m.pos.column) for m in query.messages] == [(2, 26), (6, 0)]


def test_unplaced_messages_and_every_sorry_stay_the_bodys():
    at = starts("theorem t : True := sorry", ["#print axioms t"])
    sorry = repl.ReplSorry(pos=repl.Pos(2, 0), goal="⊢ True")  # even one placed on a check line
    response = repl.Response(
        env=1, messages=[_message(None, "no position")], sorries=[sorry], message=None
    )
    body, [check] = split(response, at)
    assert [m.data for m in body.messages] == ["no position"] and body.sorries == [sorry]
    assert check.messages == [] and check.sorries == []


def test_a_repl_error_answer_is_the_bodys_and_no_check_is_answered():
    body, [check] = split(repl.Response(message="Unknown environment."), starts("x", ["t"]))
    assert body.message == "Unknown environment." and check.messages == [] and check.env is None


def test_without_checks_the_answer_is_the_bodys_unchanged():
    response = repl.Response(env=2, messages=[_message(1, ANSWER)])
    assert split(response, []) == (response, [])
