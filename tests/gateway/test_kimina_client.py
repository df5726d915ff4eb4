"""Kimina's own client (kimina-ast-client, unmodified, from the peers' Python
3.12 virtualenv) against leanrpc's REST gateway on a real port."""

from __future__ import annotations

import collections
import json

from kimina_support import kimina_inputs, run_kimina

# leanrpc status -> what Kimina's `ReplResponse.analyze()` must say.
KIMINA_STATUS = {
    "VALID": {"valid"},
    "INVALID": {"lean_error"},
    "SORRY": {"sorry"},
    "TIMEOUT": {"timeout_error"},
    "CRASH": {"server_error"},
    "OUT_OF_MEMORY": {"server_error"},
    "REJECTED": {"repl_error", "lean_error"},
}


def _messages(kimina_result: dict) -> list[tuple]:
    response = kimina_result["result"].get("response") or {}
    return sorted(
        (
            m["severity"],
            m["pos"]["line"],
            m["pos"]["column"],
            (m.get("endPos") or {}).get("line"),
            (m.get("endPos") or {}).get("column"),
            m["data"],
        )
        for m in response.get("messages") or []
    )


def _grpc_messages(result) -> list[tuple]:
    return sorted(
        (m.severity.lower(), m.line, m.column, m.end_line, m.end_column, m.text)
        for m in result.messages
    )


async def test_kimina_self_test_passes_with_sync_and_async_clients(served, peers_python):
    s = await served()
    out = await run_kimina(peers_python, s.url, "selftest")
    assert out["sync_test"] == out["async_test"] == "passed"
    assert out["health"]["status"] == "ok"


async def test_recorded_kimina_fixtures_give_the_same_verdicts_and_messages_as_grpc(
    served, peers_python, tmp_path
):
    s = await served()
    inputs = kimina_inputs()
    assert len(inputs) == 102
    snippets = [{"id": p.stem, "code": p.read_text()} for p in inputs]
    (tmp_path / "snippets.json").write_text(json.dumps(snippets))
    out = await run_kimina(
        peers_python, s.url, "check", {"path": str(tmp_path / "snippets.json"), "timeout": 60}
    )
    grpc_results = {
        r.id: r for r in await s.grpc.verify_batch([(x["id"], x["code"]) for x in snippets])
    }
    for client in ("sync", "async"):
        results = out[client]
        # Every snippet answered exactly once (the sync client merges in completion order).
        assert sorted(r["id"] for r in results) == sorted(grpc_results), client
        for r in results:
            ours = grpc_results[r["id"]]
            assert r["status"] in KIMINA_STATUS[ours.status], (
                client,
                r["id"],
                r["status"],
                ours.status,
            )
            assert _messages(r) == _grpc_messages(ours), (client, r["id"])
            assert r["result"]["time"] >= 0
    statuses = collections.Counter(r["status"] for r in out["sync"])
    assert statuses["valid"] >= 90, statuses


async def test_body_relative_lines_reproduce_the_recorded_kimina_messages(
    served, peers_python, tmp_path
):
    """With gateway.message_lines = "body", lines count from the body like the recordings."""
    s = await served(message_lines="body")
    fixtures = kimina_inputs()[0].parents[1]
    snippets, recorded = [], {}
    for path in kimina_inputs():
        response = json.loads((fixtures / "output" / (path.stem + ".json")).read_text())["results"][
            0
        ].get("response")
        if response and response.get("messages"):
            snippets.append({"id": path.stem, "code": path.read_text()})
            recorded[path.stem] = sorted(
                (m["severity"], m["pos"]["line"], m["pos"]["column"], m["data"])
                for m in response["messages"]
            )
    assert len(recorded) >= 30
    (tmp_path / "snippets.json").write_text(json.dumps(snippets))
    out = await run_kimina(
        peers_python, s.url, "check", {"path": str(tmp_path / "snippets.json"), "async": False}
    )
    for r in out["sync"]:
        got = sorted((m[0], m[1], m[2], m[5]) for m in _messages(r))
        assert got == recorded[r["id"]], r["id"]


async def test_run_benchmark_runs_on_a_small_local_dataset(served, peers_python, tmp_path):
    s = await served()
    rows = [{"id": p.stem, "code": p.read_text()} for p in kimina_inputs()[:9]]
    rows += [
        {"id": "check-nat", "code": "#check Nat"},
        {"id": "with-sorry", "code": "theorem s : 1 = 1 := by\n  sorry"},
        {"id": "lean-error", "code": "theorem e : True := by\n  exact undefined_thing"},
    ]
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (data / "README.md").write_text(
        "---\ndataset_info:\n  features:\n  - name: id\n    dtype: string\n  - name: code\n    dtype: string\n"
        "configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: train.jsonl\n---\n"
    )
    out = await run_kimina(peers_python, s.url, "bench", {"dataset": str(data), "n": len(rows)})
    assert out["runs"] == 1
    by_id = {r["id"]: r["status"] for r in out["results"]}
    assert sorted(by_id) == sorted(r["id"] for r in rows)
    assert by_id["check-nat"] == "valid" and by_id["with-sorry"] == "sorry"
    grpc = {r.id: r.status for r in await s.grpc.verify_batch([(r["id"], r["code"]) for r in rows])}
    assert all(by_id[i] in KIMINA_STATUS[grpc[i]] for i in by_id), (by_id, grpc)


async def test_bad_requests_get_kimina_error_shapes(served, peers_python):
    s = await served()
    empty = await run_kimina(
        peers_python, s.url, "raw", {"path": "/api/check", "body": {"snippets": []}}
    )
    assert empty["status"] == 422
    assert (
        empty["json"]["detail"][0]["loc"] == ["body"]
        and "non empty" in empty["json"]["detail"][0]["msg"]
    )
    wrong = await run_kimina(
        peers_python, s.url, "raw", {"path": "/api/check", "body": {"snippets": [{"id": 1}]}}
    )
    assert wrong["status"] == 422 and wrong["json"]["detail"][0]["loc"][:2] == ["body", "snippets"]
    broken = await run_kimina(
        peers_python, s.url, "raw", {"path": "/api/check", "body": "{not json"}
    )
    assert broken["status"] == 422 and broken["json"]["detail"][0]["type"] == "json_invalid"
    ast = await run_kimina(
        peers_python, s.url, "raw", {"path": "/api/ast", "body": {"modules": ["Mathlib"]}}
    )
    assert ast["status"] == 501 and "AST" in ast["json"]["detail"]


async def test_api_key_maps_onto_leanrpc_tokens(served, peers_python):
    s = await served(server__auth_tokens=["sekrit-token"])
    out = await run_kimina(peers_python, s.url, "selftest", {"key": "sekrit-token"})
    assert out["sync_test"] == "passed"
    missing = await run_kimina(
        peers_python,
        s.url,
        "raw",
        {"path": "/api/check", "body": {"snippets": [{"id": "a", "code": "#check Nat"}]}},
    )
    assert missing == {"status": 401, "json": {"detail": "Missing API key"}}
    wrong = await run_kimina(
        peers_python,
        s.url,
        "raw",
        {
            "key": "nope",
            "path": "/api/check",
            "body": {"snippets": [{"id": "a", "code": "#check Nat"}]},
        },
    )
    assert wrong == {"status": 401, "json": {"detail": "Invalid API key"}}
