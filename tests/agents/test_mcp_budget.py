"""The output budget of one tool result (agents/budget.py): long texts cut, long lists
shortened, handles and one entry per state or attempt kept whole, a note saying how much."""

from __future__ import annotations

import json

from leanrpc.agents.budget import fit


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def test_a_small_result_is_left_as_it_was():
    result = {"status": "VALID", "messages": [{"text": "ok"}]}
    assert fit(result, 2000, 100) == result


def test_long_texts_are_cut_and_counted():
    result = {"status": "INVALID", "messages": [{"text": "x" * 5000}]}
    out = fit(result, 20_000, 100)
    text = out["messages"][0]["text"]
    assert text.startswith("x" * 100) and text.endswith("[4900 characters cut]")
    assert out["truncated"]["chars_cut"] == 4900 and out["truncated"]["fields_cut"] == 1
    assert result["messages"][0]["text"] == "x" * 5000  # the input is the caller's


def test_long_lists_lose_items_from_their_end_until_the_result_fits():
    result = {"status": "INVALID", "messages": [{"text": f"m{k} " + "y" * 80} for k in range(500)]}
    out = fit(result, 4000, 1000)
    assert _size(out) <= 4000
    kept = out["messages"]
    assert 0 < len(kept) < 500 and kept[0]["text"].startswith("m0 ")
    assert out["truncated"]["items_dropped"] == 500 - len(kept)
    assert "max_output_chars" in out["truncated"]["note"]


def test_states_and_attempts_are_never_dropped_and_handles_never_cut():
    attempts = [
        {"tried": f"t{k}", "status": "INCOMPLETE", "state_id": f"s-{k:020d}", "goals": ["g" * 3000]}
        for k in range(16)
    ]
    out = fit({"state_id": "s-root", "attempts": attempts}, 4000, 2000)
    assert [a["state_id"] for a in out["attempts"]] == [f"s-{k:020d}" for k in range(16)]
    assert all(a["status"] == "INCOMPLETE" for a in out["attempts"])
    assert _size(out) <= 4000 and out["truncated"]["fields_cut"] >= 16
