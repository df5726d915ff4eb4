"""Every door resolves a request once (services/resolve.py): counted while
requests pass through a real server, gRPC and REST; bad input keeps its code."""

from __future__ import annotations

import aiohttp
import grpc
import pytest

from leanrpc.client import ClientError
from leanrpc.core.header_memo import HeaderMemo
from leanrpc.services import resolve

CODE = "theorem t : True := trivial"


@pytest.fixture
def counted(monkeypatch):
    """Counts resolutions and header splits. The resolver splits through its memo
    (core/header_memo.py), which may reuse an earlier split of the same head: each
    request asks it once, whether or not `split_header` runs again."""
    calls = {"resolve": 0, "split": 0}
    real_resolve, real_split = resolve.Resolver.resolve, HeaderMemo.split

    def counting_resolve(self, *args, **kwargs):
        calls["resolve"] += 1
        return real_resolve(self, *args, **kwargs)

    def counting_split(self, text):
        calls["split"] += 1
        return real_split(self, text)

    monkeypatch.setattr(resolve.Resolver, "resolve", counting_resolve)
    monkeypatch.setattr(HeaderMemo, "split", counting_split)
    return calls


async def _rest(url: str, code: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            url + "/api/check", json={"snippets": [{"id": "1", "code": code}]}
        ) as response:
            return response.status, await response.json()


async def test_each_door_resolves_each_request_once(served, counted):
    s = await served()
    results = await s.grpc.verify_batch([CODE, CODE + "\n"])
    assert [str(r.status) for r in results] == ["VALID", "VALID"]
    assert counted == {"resolve": 2, "split": 2}
    status, body = await _rest(s.url, CODE)
    assert status == 200 and "error" not in body["results"][0], body
    assert counted == {"resolve": 3, "split": 3}
    await s.grpc.extract(CODE)
    assert counted == {"resolve": 4, "split": 4}
    opened = await s.grpc.open_session(CODE, name="once")
    assert counted["resolve"] == 5 and counted["split"] == 5, opened
    await s.grpc.run_in_session("once", "theorem u : True := trivial")
    assert counted == {"resolve": 6, "split": 6}


async def test_bad_input_keeps_its_status_at_each_door(served, counted):
    s = await served()
    with pytest.raises(ClientError) as refused:
        await s.grpc.verify_batch([CODE, "x\x00"])
    assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert "snippet 1" in str(refused.value)
    status, body = await _rest(s.url, "")
    assert status == 200 and "Rejected by leanrpc: snippet code is empty" in str(body)
    assert counted["split"] == 1  # refused input is never split; the good snippet once
