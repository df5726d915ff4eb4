"""The byte budget (edge/budget.py) and the decode bound (gateway/intake.py) as
tables of situations, no sockets; and the one aiohttp internal intake relies on."""

from __future__ import annotations

import json
import sys

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from leanrpc.edge.budget import BudgetExceeded, ByteBudget, decoded_bound
from leanrpc.errors import OverloadedError


def test_per_peer_and_server_budgets_refuse_and_say_which():
    budget = ByteBudget(per_peer=100, total=150)
    budget.acquire("a", 100)
    with pytest.raises(BudgetExceeded) as peer:
        budget.acquire("a", 1)
    assert peer.value.scope == "peer" and "memory.in_flight_mb_per_peer" in peer.value.message
    budget.acquire("b", 50)
    with pytest.raises(BudgetExceeded) as server:
        budget.acquire("c", 1)
    assert server.value.scope == "server" and "memory.in_flight_mb)" in server.value.message
    assert isinstance(server.value, OverloadedError) and server.value.retry_after_s >= 1
    assert budget.held_total == 150 and dict(budget.refused) == {"peer": 1, "server": 1}
    budget.release("a", 100)
    budget.acquire("c", 100)
    assert budget.held == {"b": 50, "c": 100}


def test_a_ticket_gives_back_everything_once():
    budget = ByteBudget(per_peer=0, total=10)
    with budget.ticket("p") as ticket:
        ticket.acquire(4)
        ticket.acquire(6)
        with pytest.raises(BudgetExceeded):
            ticket.acquire(1)
        assert ticket.held == 10
    ticket.close()
    assert budget.held_total == 0 and not budget.held


@pytest.mark.parametrize(
    "code, factor",
    [
        ("theorem t : True := trivial", 1),
        ("∀ x, x = x", 2),  # BMP: 2 bytes a character
        ("\\u2200 x", 4),  # an escape could be half of a surrogate pair: bounded at 4x
        ("a" * 1000 + "😀", 4),  # one astral character makes the whole str 4 bytes a character
        ("a" * 1000 + "\\ud83d\\ude00", 4),  # the same as a surrogate-pair escape
    ],
)
def test_decoded_bound_covers_what_decoding_really_holds(code, factor):
    body = ('{"snippets": [{"id": "a", "code": "' + code + '"}]}').encode()
    decoded = json.loads(body)["snippets"][0]["code"]
    assert decoded_bound(body) == len(body) * factor
    # what the str really holds (sys.getsizeof less a str's fixed header)
    assert sys.getsizeof(decoded) - sys.getsizeof("") <= decoded_bound(body)


async def test_aiohttp_returns_the_body_intake_hands_over():
    """intake sets `_read_bytes`, aiohttp's cache of a read body; read/text/json return it."""
    request = make_mocked_request(
        "POST", "/api/check", headers={"Content-Type": "application/json"}
    )
    request._read_bytes = bytearray(b'{"a": 1}')
    assert await request.read() == b'{"a": 1}'
    assert await request.json() == {"a": 1}
    assert isinstance(request, web.BaseRequest)
