"""The REST gateway's `/api/check` takes the REPL command options (issue 41),
spelled as LeanInteract spells them, and answers them REPL-shaped."""

from __future__ import annotations

import aiohttp

CODE = (
    "import Mathlib\n\ntheorem a : 1 = 1 := by\n  skip\n  rfl\n\ntheorem b : 2 = 2 := by\n  rfl\n"
)


async def _check(url: str, body: dict) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/api/check", json=body) as response:
            assert response.status == 200, await response.text()
            return await response.json()


async def test_check_answers_tactics_and_root_goals_repl_shaped(served):
    s = await served(workers=1, message_lines="body")
    snippets = [{"id": "a", "code": CODE}]
    asked = await _check(
        s.url, {"snippets": snippets, "all_tactics": True, "root_goals": True, "timeout": 20}
    )
    plain = await _check(s.url, {"snippets": snippets, "timeout": 20})
    [result] = asked["results"]
    response = result["response"]
    assert result["leanrpc"]["status"] == "VALID"
    # Root goals are not sorries: Kimina's analyze() must agree with VALID.
    assert "sorries" not in response
    # Lines relative to the body (message_lines = "body"), as messages are.
    assert [(g["pos"]["line"], g["pos"]["column"], g["goal"]) for g in response["rootGoals"]] == [
        (1, 21, "⊢ 1 = 1"),
        (5, 21, "⊢ 2 = 2"),
    ]
    assert [(t["tactic"], t["pos"]["line"], t["goals"]) for t in response["tactics"]] == [
        ("skip", 2, "⊢ 1 = 1"),
        ("rfl", 3, "⊢ 1 = 1"),
        ("rfl", 6, "⊢ 2 = 2"),
    ]
    assert response["tactics"][0]["endPos"] == {"line": 2, "column": 6}
    [without] = plain["results"]
    assert not {"tactics", "rootGoals", "declarations"} & set(without["response"])


async def test_check_refuses_a_mistyped_option(served):
    s = await served(workers=1)
    async with aiohttp.ClientSession() as session:
        body = {"snippets": [{"id": "a", "code": CODE}], "all_tactics": "yes"}
        async with session.post(s.url + "/api/check", json=body) as response:
            assert response.status == 422
            detail = (await response.json())["detail"]
    assert detail[0]["loc"] == ["body", "all_tactics"]
