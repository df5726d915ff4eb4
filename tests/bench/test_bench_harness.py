"""The load generator on short runs against a real leanrpc server with the REPL stand-in.

Assertions are on counts, statuses and the JSON schema, never on speed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics

import pytest

from benchmarks import load, workloads

TINY = 0.002  # cost scale: proofs burn ~6 ms on average


def _cfg(**kw) -> load.RunConfig:
    base = dict(workers=2, scale=TINY, warmup=2, progress=False, timeout_s=60.0)
    base.update(kw)
    return load.RunConfig(**base)


def _assert_counts_add_up(summary: dict, sent: int | None = None) -> None:
    req = summary["requests"]
    if sent is not None:
        assert req["sent"] == sent
    assert req["lost"] == 0
    assert req["recorded"] == req["sent"]
    assert req["answered"] + req["failed"] == req["recorded"]
    assert sum(summary["statuses"].values()) == req["answered"]
    assert sum(summary["errors"].values()) == req["failed"]
    assert summary["latency_ms"]["n"] == req["answered"]


def test_workloads_are_real_proofs_with_costs_in_the_paper_shape():
    for source in ("kimina", "minif2f", "proofnet"):
        items = workloads.load(source, scale=1.0)
        assert len(items) > 100
        assert len({i.id for i in items}) == len(items)
        assert all(i.burn_s > 0 and f"--@standin: burn={i.burn_s:.6f}" in i.code for i in items)
        assert all("theorem" in i.code or "lemma" in i.code for i in items)
        mean = statistics.fmean(i.burn_s for i in items)
        # Rescaled to Kimina's 3.2 s/proof; heavy tail kept (max >> median).
        assert 2.0 < mean < 4.5, (source, mean)
        costs = sorted(i.burn_s for i in items)
        assert costs[-1] > 10 * costs[len(costs) // 2]
    scaled = workloads.load("minif2f", scale=0.01, limit=5)
    full = workloads.load("minif2f", scale=1.0, limit=5)
    assert [round(a.burn_s * 100, 9) for a in scaled] == [round(b.burn_s, 9) for b in full]
    mixed = workloads.load("mixed", limit=6)
    assert [i.source for i in mixed] == ["kimina", "minif2f", "proofnet"] * 2
    assert workloads.import_cost(0.02) == pytest.approx(0.16)


def test_split_and_classify_match_the_peers_conventions():
    header, body = workloads.split_imports(
        "import Mathlib\nimport Aesop\n\nset_option x 0\ntheorem t : True := trivial"
    )
    assert header == "import Mathlib\nimport Aesop"
    assert body.startswith("set_option")
    assert workloads.classify([{"severity": "error", "data": "x"}]) == "INVALID"
    assert (
        workloads.classify([{"severity": "warning", "data": "declaration uses 'sorry'"}]) == "SORRY"
    )
    assert workloads.classify([{"severity": "info", "data": "ok"}]) == "VALID"


def test_percentiles_and_aggregation():
    values = sorted(float(v) for v in range(101))
    assert load.percentile(values, 0.5) == 50.0
    assert load.percentile(values, 0.99) == 99.0
    assert load.distribution_ms([])["p50"] is None
    assert load.distribution_ms([0.001, 0.003])["max"] == 3.0


def test_closed_loop_unary_run_counts_add_up_and_schema_is_stable():
    items = workloads.load("mixed", scale=TINY, limit=12)
    summary = asyncio.run(load.run_async(_cfg(requests=30, concurrency=4), items))
    assert tuple(summary) == load.SUMMARY_KEYS
    assert summary["schema"] == "leanrpc-bench/1"
    _assert_counts_add_up(summary, sent=30)
    assert summary["requests"]["answered"] == 30
    assert set(summary["statuses"]) <= {"VALID", "INVALID", "SORRY"}
    assert summary["config"]["server_info"]["verifier"] == "stand-in"
    for section in ("latency_ms", "repl_ms", "overhead_ms", "server_internal_ms"):
        assert set(summary[section]) == {"n", "mean", "p50", "p90", "p99", "max"}
        assert summary[section]["p50"] <= summary[section]["p99"] <= summary[section]["max"]
    assert summary["repl_ms"]["n"] == summary["server_internal_ms"]["n"] == 30
    # The server's own share cannot exceed what the client saw around the REPL.
    assert summary["server_internal_ms"]["p50"] <= summary["overhead_ms"]["p50"] + 1e-6
    assert 0 < summary["server"]["repl_busy_share"] <= 1.05
    assert summary["throughput_rps"] > 0 and summary["ideal_rps"] > 0
    assert summary["server"]["repl_cpu_s"] > 0
    assert summary["server"]["rss_mb_max"] > 0
    # JSON-serializable as is, and the table renders every run.
    assert json.loads(json.dumps(summary)) == summary
    assert "leanrpc" in load.table([summary])


def test_open_loop_streaming_by_duration_loses_nothing():
    items = workloads.load("kimina", scale=TINY, limit=20)
    cfg = _cfg(mode="open", rate=25.0, duration_s=2.0, rpc="stream")
    summary = asyncio.run(load.run_async(cfg, items))
    _assert_counts_add_up(summary)
    assert summary["requests"]["sent"] >= 10
    assert summary["requests"]["failed"] == 0


def test_rpc_errors_are_counted_by_status_code():
    good = workloads.load("kimina", scale=TINY, limit=3)
    empty = workloads.Item("empty", "", 0.0, "test")  # empty code: INVALID_ARGUMENT
    summary = asyncio.run(
        load.run_async(_cfg(requests=8, concurrency=2, warmup=0), [good[0], empty])
    )
    _assert_counts_add_up(summary, sent=8)
    assert summary["errors"] == {"grpc:INVALID_ARGUMENT": 4}
    assert summary["requests"]["answered"] == 4


def test_aggregate_sums_counts_and_averages_rates():
    a = {
        "requests": {"sent": 2, "recorded": 2, "answered": 2, "failed": 0, "lost": 0},
        "statuses": {"VALID": 2},
        "errors": {},
        "throughput_rps": 1.0,
        "ideal_rps": 2.0,
        "ratio_to_ideal": 0.5,
        "duration_s": 2.0,
        "started_at": "t",
        "latency_ms": {"n": 2, "mean": 1, "p50": 1, "p90": 1, "p99": 1, "max": 1},
        "repl_ms": {"n": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None},
        "overhead_ms": {"n": 2, "mean": 1, "p50": 1, "p90": 1, "p99": 1, "max": 1},
        "server_internal_ms": {"n": 2, "mean": 1, "p50": 1, "p90": 1, "p99": 1, "max": 1},
        "server": {
            "cpu_s": 1,
            "cpu_percent": 1,
            "rss_mb_max": 1,
            "repl_cpu_s": 1,
            "repl_rss_mb_max": 1,
            "repl_cpu_share": 0.5,
        },
    }
    b = json.loads(json.dumps(a))
    b["throughput_rps"] = 3.0
    b["statuses"] = {"VALID": 1, "SORRY": 1}
    merged = load.aggregate([a, b])
    assert merged["requests"]["sent"] == 4
    assert merged["statuses"] == {"VALID": 3, "SORRY": 1}
    assert merged["throughput_rps"] == 2.0
    assert merged["repl_ms"]["p50"] is None
    assert merged["rounds"] == 2


class _FakeKimina:
    """A loopback HTTP server answering /api/check the way Kimina v2 does."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    async def handle(self, reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            length = 0
            while header := (await reader.readline()).strip():
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            payload = json.loads(await reader.readexactly(length))
            self.requests.append(payload)
            snippet = payload["snippets"][0]
            if "fail" in snippet["code"]:
                body, code = b'{"detail": "busy"}', 429
            elif "slow" in snippet["code"]:
                result = {
                    "id": snippet["id"],
                    "time": 0.5,
                    "error": "Lean REPL command timed out in 1 seconds",
                }
                body, code = json.dumps({"results": [result]}).encode(), 200
            else:
                messages = (
                    [{"severity": "warning", "data": "declaration uses 'sorry'"}]
                    if "sorry" in snippet["code"]
                    else []
                )
                result = {
                    "id": snippet["id"],
                    "time": 0.01,
                    "response": {"messages": messages, "env": 0},
                }
                body, code = json.dumps({"results": [result]}).encode(), 200
            writer.write(
                f"HTTP/1.1 {code} X\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body
            )
            await writer.drain()
        writer.close()


def test_kimina_target_maps_http_answers_to_statuses(tmp_path):
    async def scenario():
        fake = _FakeKimina()
        server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
        target = load.KiminaTarget(_cfg(target="kimina", requests=1), tmp_path)
        target.port = server.sockets[0].getsockname()[1]
        try:
            codes = ["theorem a : True := trivial", "theorem b : True := sorry", "fail", "slow"]
            records = [
                await target.send(workloads.Item(f"i{n}", c, 0.01, "t"), f"r{n}")
                for n, c in enumerate(codes)
            ]
        finally:
            await target.stop()
            server.close()
            await server.wait_closed()
        return fake, records

    fake, records = asyncio.run(scenario())
    assert [r.status for r in records] == ["VALID", "SORRY", "http:429", "TIMEOUT"]
    assert records[0].repl_s == pytest.approx(0.01)
    assert [p["snippets"][0]["id"] for p in fake.requests] == ["r0", "r1", "r2", "r3"]
    assert all(p["reuse"] is True for p in fake.requests)


def test_kimina_rest_target_runs_leanrpc_behind_the_gateway_with_the_same_statuses():
    items = workloads.load("mixed", scale=TINY, limit=12)
    rest = asyncio.run(
        load.run_async(_cfg(target="kimina_rest", requests=24, concurrency=4), items)
    )
    grpc = asyncio.run(load.run_async(_cfg(target="leanrpc", requests=24, concurrency=4), items))
    assert tuple(rest) == load.SUMMARY_KEYS and rest["target"] == "kimina_rest"
    _assert_counts_add_up(rest, sent=24)
    assert rest["requests"]["answered"] == 24
    # Same proofs in the same order: the gateway gives leanrpc's own verdicts.
    assert rest["statuses"] == grpc["statuses"]
    assert rest["config"]["server_info"]["verifier"] == "stand-in"
    assert rest["repl_ms"]["n"] == rest["server_internal_ms"]["n"] == 24


def test_benchmark_rooms_import_without_cycles():
    """config/measure/report/targets/driver/plots/cli import downward only (issue 17)."""
    import ast
    from pathlib import Path

    root = Path(load.__file__).resolve().parent
    order = [
        "workloads",
        "config",
        "measure",
        "report",
        "targets",
        "driver",
        "plots",
        "peers",
        "cli",
        "load",
    ]
    checked = 0
    for path in [
        *root.glob("*.py"),
        *(root / "targets").glob("*.py"),
        root / "peers" / "compare.py",
    ]:
        room = path.parent.name if path.parent.name in ("targets", "peers") else path.stem
        if room not in order:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level
                and not (room != path.stem and node.level == 1)
            ):
                names = (
                    [(node.module or "").split(".")[0]]
                    if node.module
                    else [a.name for a in node.names]
                )
                for name in names:
                    if name in order:
                        assert order.index(name) < order.index(room), (str(path), name)
                        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("rpc", ["unary", "stream"])
def test_tiny_compare_over_leanrpc_and_its_rest_gateway_has_zero_errors(tmp_path, rpc):
    """The side-by-side harness end to end (the `compare` command, as run for RESULTS.md): a
    contract change that breaks a target (Duration timings, a gateway 500) shows up as errors.
    `--rpc stream` adds the VerifyStream row with its own ratios; the unary rows stay."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "compare.json"
    repo = Path(load.__file__).resolve().parents[1]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.load",
            "compare",
            "--workload",
            "mixed",
            "--workers",
            "2",
            "--requests",
            "16",
            "--rounds",
            "1",
            "--scale",
            str(TINY),
            "--targets",
            "leanrpc,kimina_rest",
            "--rpc",
            rpc,
            "--quiet",
            "--json",
            str(out),
            "--out-dir",
            str(tmp_path),
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    # The peer-comparable row runs with leanrpc's checks off; a second row keeps them on.
    rows = {"leanrpc", "kimina_rest", "leanrpc (default checks)"}
    assert set(report["results"]) == rows | (
        {"leanrpc (VerifyStream)"} if rpc == "stream" else set()
    )
    assert report["results"]["leanrpc"]["config"]["checks"] == "off"
    assert report["results"]["leanrpc"]["config"]["rpc"] == "unary"
    assert report["results"]["leanrpc (default checks)"]["config"]["checks"] == "default"
    if rpc == "stream":
        streamed = report["results"]["leanrpc (VerifyStream)"]["config"]
        assert (streamed["rpc"], streamed["checks"]) == ("stream", "off")
        assert set(report["ratios_stream"]) == {"kimina_rest"}
        assert all(v is not None for v in report["ratios_stream"]["kimina_rest"].values())
    else:
        assert "ratios_stream" not in report
    assert all(
        r["foreign_load_pct"] is not None
        for s in report["results"].values()
        for r in s["per_round"]
    )
    for name, summary in report["results"].items():
        assert summary["errors"] == {}, (name, summary["errors"])
        _assert_counts_add_up(summary, sent=16)
        assert summary["requests"]["answered"] == 16
    assert report["no_successes"] == []
    assert all(v is not None for v in report["ratios"]["kimina_rest"].values())
    assert (tmp_path / "compare_peers.png").stat().st_size > 0


def test_ratios_report_a_target_with_no_successes_instead_of_crashing(tmp_path):
    from benchmarks.peers import compare

    def summary(answered: int, p50: float | None) -> dict:
        latency = {"n": answered, "mean": p50, "p50": p50, "p90": p50, "p99": p50, "max": p50}
        return {
            "requests": {
                "sent": 10,
                "recorded": 10,
                "answered": answered,
                "failed": 10 - answered,
                "lost": 0,
            },
            "throughput_rps": 2.0 if answered else 0.0,
            "ideal_rps": 4.0,
            "latency_ms": latency,
        }

    ok, dead = summary(10, 100.0), summary(0, None)
    assert compare.ratios({"leanrpc": dead, "kimina": ok}) == {
        "kimina": {"throughput_x": None, "p50_x": None, "p99_x": None}
    }
    assert compare.ratios({"leanrpc": ok, "kimina": dead})["kimina"]["p50_x"] is None
    assert compare.ratios({"leanrpc": ok, "kimina": summary(10, 50.0)})["kimina"] == {
        "throughput_x": 1.0,
        "p50_x": 2.0,
        "p99_x": 2.0,
    }
    assert compare.no_successes({"leanrpc": dead, "kimina": ok}) == ["leanrpc"]
    assert compare.plot({"leanrpc": dead, "kimina": ok}, tmp_path, 2).stat().st_size > 0


def test_grpo_run_side_by_side_gives_the_same_verdicts_and_serves_duplicates_from_the_cache(capsys):
    from benchmarks import grpo

    items = grpo.grpo_items(2, 8, 0.5, scale=TINY)
    assert len(items) == 16 and grpo.duplicate_share(items) == 0.5

    class Args:
        statements, completions, dup_rates, concurrent_groups = 2, 8, [50], 2
        workers, scale, seed, kimina = 2, TINY, 0, False

    (row,) = asyncio.run(grpo.run(Args))
    assert row["same_verdicts"] is True
    assert row["nocache"]["answers"] == row["cache"]["answers"] == 16
    assert row["nocache"]["sources"] == {"elaborated": 16}
    # Exactly the unique completions were elaborated; the rest came from the cache or in flight.
    assert (
        row["cache"]["sources"].get("elaborated") == 8
        and sum(row["cache"]["sources"].values()) == 16
    )
    # REPL seconds are summed over elaborated results only (a cached answer carries the original's timings).
    assert row["nocache"]["repl_s"] > 0 and row["cache"]["repl_s"] > 0
    assert row["repl_saving"] == row["nocache"]["repl_s"] / row["cache"]["repl_s"]
    assert "| 50% (50.0%) | 16 |" in grpo.table([row])


def test_cache_miss_row_measures_fresh_processes():
    """The scaling benchmark's "cache miss (reuse=false)" row: every answer from a fresh
    process (issue 28 item 4; it used to be answered by the warm workers)."""
    from benchmarks.cli import scaling_configs, warm_without_reuse

    miss = scaling_configs(_cfg(requests=6, concurrency=2), [2])["cache miss (reuse=false)"]
    assert miss.reuse is False
    items = workloads.load("minif2f", scale=TINY, limit=4)
    summary = asyncio.run(
        load.run_async(dataclasses.replace(miss, requests=6, concurrency=2, warmup=2), items)
    )
    _assert_counts_add_up(summary, sent=6)
    assert summary["requests"]["answered"] == 6 and summary["requests"]["warm_answers"] == 0
    assert warm_without_reuse(summary) is None
    warm = asyncio.run(load.run_async(_cfg(requests=6, concurrency=2), items))
    assert warm["requests"]["warm_answers"] > 0 and warm_without_reuse(warm) is None
    flagged = dict(summary, requests=dict(summary["requests"], warm_answers=3))
    assert "did not measure fresh processes" in warm_without_reuse(flagged)
