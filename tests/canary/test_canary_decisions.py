"""When a worker gets a canary, how its answer is judged, what the writer writes
(issue 43 item 5): tables, no processes."""

from __future__ import annotations

import random
import re

import pytest

from leanrpc.config import Config, ConfigError
from leanrpc.pool.canary import CLIENT_SWITCH, RATE, CanaryProbe, Claim, due, holds, riders_due
from leanrpc.repl import Response
from leanrpc.repl.protocol import Pos, ReplMessage, ReplSorry
from leanrpc.services.canary import CanaryWriter
from leanrpc.standin.evaluate import decide_refutes


@pytest.mark.parametrize(
    "last, client, draw, rate, on_switch, expected",
    [
        (None, "alice", 0.9, 0.05, True, None),  # a new worker, no draw under the rate
        (None, "alice", 0.01, 0.05, True, RATE),
        ("alice", "alice", 0.5, 0.05, True, None),  # the same client again
        ("alice", "alice", 0.04, 0.05, True, RATE),
        ("alice", "bob", 0.9, 0.05, True, CLIENT_SWITCH),  # before another client, always
        ("alice", "bob", 0.9, 0.0, True, CLIENT_SWITCH),
        ("alice", "bob", 0.9, 0.05, False, None),  # switch canaries turned off
        ("alice", "bob", 0.0, 0.0, False, None),  # rate 0: never by draw
        ("alice", "", 0.9, 0.05, True, CLIENT_SWITCH),  # the anonymous peer is a client too
    ],
)
def test_when_a_canary_is_due(last, client, draw, rate, on_switch, expected):
    assert due(last, client, draw, rate, on_switch) == expected


@pytest.mark.parametrize(
    "draw, rate, riders, lead_had_one, expected",
    [
        (0.30, 0.05, 15, False, RATE),  # 1 - 0.95**15 = 0.537: a group of 16 draws as 16 jobs
        (0.60, 0.05, 15, False, None),
        (0.04, 0.05, 1, False, RATE),  # one rider draws as one job
        (0.06, 0.05, 1, False, None),
        (0.31, 0.05, 7, False, None),  # 1 - 0.95**7 = 0.302
        (0.29, 0.05, 7, False, RATE),
        (0.00, 0.05, 15, True, None),  # the lead's canary came before the whole group
        (0.99, 1.00, 3, False, RATE),
        (0.00, 0.00, 15, False, None),  # rate 0: never by draw
        (0.00, 0.05, 0, False, None),
    ],
)
def test_when_a_groups_riders_get_a_canary(draw, rate, riders, lead_had_one, expected):
    assert riders_due(draw, rate, riders, lead_had_one) == expected


def test_a_group_gets_a_canary_as_often_as_its_bodies_alone_would():
    rng, rate, riders, groups = random.Random(5), 0.05, 15, 20_000
    had = 0
    for _ in range(groups):
        lead = due("alice", "alice", rng.random(), rate, True) is not None
        had += lead or riders_due(rng.random(), rate, riders, lead) is not None
    assert abs(had / groups - (1 - (1 - rate) ** (riders + 1))) < 0.015  # 0.56, not 0.05


def _message(severity: str) -> ReplMessage:
    return ReplMessage(severity=severity, pos=None, end_pos=None, data="x")


def _error(line: int) -> ReplMessage:
    return ReplMessage(severity="error", pos=Pos(line, 2), end_pos=None, data="decide failed")


PROBE = CanaryProbe("…", (Claim(1, 2, False), Claim(4, 4, True), Claim(5, 6, False)))


@pytest.mark.parametrize(
    "response, proved",
    [
        (Response(env=3, messages=[_error(2), _error(6)]), True),  # what Lean answers
        (Response(env=3, messages=[_error(2), _error(6), _message("info")]), True),
        (Response(env=3, messages=[_error(2)]), False),  # a false claim proved
        (Response(env=3), False),  # every error stripped
        (Response(env=3, messages=[_error(2), _error(4), _error(6)]), False),  # a true one refused
        (Response(env=3, messages=[_error(2), _error(6), _error(9)]), False),  # an error elsewhere
        (
            Response(
                env=3,
                messages=[_error(1), _error(5)],
                sorries=[ReplSorry(pos=None, end_pos=None, goal="⊢ p")],
            ),
            False,
        ),
        (Response(message="Lean error: unknown environment"), False),  # no env
    ],
)
def test_how_an_answer_is_judged(response, proved):
    assert holds(response, PROBE) is proved


def test_the_writer_varies_everything_and_knows_each_truth():
    writer = CanaryWriter(random.Random(7))
    probes = [writer.make() for _ in range(1000)]
    assert len({p.text for p in probes}) > 990  # fresh names, numbers and layout
    for probe in probes:  # both kinds in each, and the stand-in's `decide` agrees
        assert {c.holds for c in probe.claims} == {True, False} and len(probe.claims) <= 3
        lines = probe.text.split("\n")
        for claim in probe.claims:
            decl = " ".join(lines[claim.first_line - 1 : claim.last_line])
            statement = re.search(r" : (.*?) :=", decl)[1]
            assert decide_refutes(statement) is not claim.holds, probe
        names = re.findall(r"theorem (\S+)", probe.text)
        assert len(names) == len(set(names))
        assert "#" not in probe.text and "sorry" not in probe.text
    texts = "".join(p.text for p in probes)
    assert "example" in texts and "--" in texts and "by\n" in texts and "by decide" in texts


def test_the_config_keys_and_their_ranges():
    config = Config.from_dict({"canary": {"rate": 0.25, "on_client_switch": False}})
    assert config.canary.rate == 0.25 and config.canary.enabled
    assert Config().canary.rate == 0.05 and Config().canary.on_client_switch
    with pytest.raises(ConfigError, match="rate"):
        Config.from_dict({"canary": {"rate": 1.5}})
