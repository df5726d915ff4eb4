"""The REST gateway names its caller as gRPC does (edge/identity.py) and passes
it to Verify, so fair admission and per-client limits see one client per
token across both doors, not one client "" for all REST traffic."""

from __future__ import annotations

import aiohttp

from leanrpc.edge.identity import CallerIdentity

TOKENS = ["rest-token-a", "rest-token-b"]
CHECK = {"snippets": [{"id": "1", "code": "theorem t : True := trivial"}]}


class _Spy:
    def __init__(self, verify) -> None:
        self.calls: list[tuple[str, str]] = []
        self._run = verify.run  # every door resolves, then runs the resolved request
        verify.run = self

    async def __call__(self, request):
        self.calls.append((request.client_id, request.stream_id))
        return await self._run(request)


async def _check(url: str, authorization: str | None) -> int:
    headers = {"Authorization": authorization} if authorization else {}
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/api/check", json=CHECK, headers=headers) as response:
            await response.read()
            return response.status


def _token_identity(token: str) -> str:
    return CallerIdentity(tokens_checked=True).of_metadata(
        (("authorization", f"Bearer {token}"),), "ipv4:1.2.3.4:5"
    )


async def test_rest_callers_reach_verify_as_their_token_the_same_as_over_grpc(served, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    s = await served(server__auth_tokens=TOKENS)
    spy = _Spy(s.app.verify)
    assert await _check(s.url, f"Bearer {TOKENS[0]}") == 200
    assert await _check(s.url, TOKENS[0]) == 200  # Kimina's form without "Bearer "
    assert await _check(s.url, f"Bearer {TOKENS[1]}") == 200
    assert await _check(s.url, "Bearer made-up") == 401
    await s.grpc.verify_batch(
        ["theorem t : True := trivial"]
    )  # the fixture's client holds TOKENS[0]
    a, b = _token_identity(TOKENS[0]), _token_identity(TOKENS[1])
    assert [client for client, _stream in spy.calls] == [a, a, b, a]
    assert all(
        stream for _client, stream in spy.calls
    )  # each REST batch is its own stream in the fair queue


async def test_without_tokens_a_made_up_rest_key_is_the_peer(served, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    s = await served()
    spy = _Spy(s.app.verify)
    for key in ("Bearer made-up-1", "made-up-2", None):
        assert await _check(s.url, key) == 200
    assert [client for client, _stream in spy.calls] == ["peer:ipv4:127.0.0.1"] * 3
