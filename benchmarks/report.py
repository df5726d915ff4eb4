"""Reports: one run's summary (schema leanrpc-bench/1), the text table, the mean over rounds.

May import: benchmarks.config, benchmarks.measure.
"""

from __future__ import annotations

import dataclasses
import json
import statistics

from .config import SCHEMA, Record, RunConfig
from .measure import distribution_ms, machine


def summarize(
    cfg: RunConfig,
    target_name: str,
    info: dict,
    records: list[Record],
    sent: int,
    elapsed: float,
    server: dict,
    started_at: str,
) -> dict:
    statuses: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in records:
        bucket = errors if ":" in r.status else statuses
        bucket[r.status] = bucket.get(r.status, 0) + 1
    answered = [r for r in records if ":" not in r.status]
    latencies = [r.end - r.start for r in answered]
    repl = [r.repl_s for r in answered if r.repl_s is not None]
    overhead = [
        r.end - r.start - (r.queue_s or 0.0) - r.repl_s for r in answered if r.repl_s is not None
    ]
    internal = [
        r.server_total_s - (r.queue_s or 0.0) - r.repl_s
        for r in answered
        if r.server_total_s is not None and r.repl_s is not None
    ]
    burns = [r.burn_s for r in records]
    mean_burn = statistics.fmean(burns) if burns else 0.0
    ideal = cfg.workers / mean_burn if mean_burn else 0.0
    throughput = len(answered) / elapsed if elapsed else 0.0
    # Share of `workers` cores the REPLs actually got: on a shared machine this, not the server,
    # usually bounds ratio_to_ideal.
    # repl_busy_share: time the REPLs spent on requests (as the server measured it) over the
    # time available; near 1 means the stack keeps its REPLs fed.
    capacity = cfg.workers * elapsed
    server = {
        **server,
        "repl_cpu_share": round(server["repl_cpu_s"] / capacity, 3) if capacity else 0.0,
        "repl_busy_share": round(sum(repl) / capacity, 3) if capacity and repl else None,
        # server CPU per answered request (the in-process peer: its Python side's CPU)
        "cpu_ms_per_request": round(1000 * server["cpu_s"] / len(answered), 3)
        if answered
        else None,
    }
    return {
        "schema": SCHEMA,
        "target": target_name,
        "config": {
            **dataclasses.asdict(cfg),
            "concurrency": cfg.concurrency or 2 * cfg.workers,
            "server_info": info,
        },
        "machine": machine(),
        "started_at": started_at,
        "requests": {
            "sent": sent,
            "recorded": len(records),
            "answered": len(answered),
            "failed": len(records) - len(answered),
            "lost": sent - len(records),
            # reuse=false must never be answered warm (issue 28 item 4): cli checks it
            "warm_answers": sum(1 for r in answered if r.warm_header),
        },
        "statuses": dict(sorted(statuses.items())),
        "errors": dict(sorted(errors.items())),
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(throughput, 3),
        "latency_ms": distribution_ms(latencies),
        "repl_ms": distribution_ms(repl),
        "overhead_ms": distribution_ms(overhead),
        "server_internal_ms": distribution_ms(internal),
        "ideal_rps": round(ideal, 3),
        "ratio_to_ideal": round(throughput / ideal, 4) if ideal else 0.0,
        "server": server,
    }


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(summaries: list[dict]) -> str:
    head = (
        "target",
        "rpc",
        "workers",
        "reuse",
        "core",
        "sent",
        "answered",
        "lost",
        "req/s",
        "ideal",
        "ratio",
        "repl cpu",
        "repl busy",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "ovh p50",
        "ovh p99",
        "srv p50",
        "srv p99",
        "srv cpu%",
        "srv ms/req",
        "srv MB",
        "foreign %",
    )
    rows = [head]
    for s in summaries:
        c = s["config"]
        rows.append(
            (
                s["target"]
                + (" checks=off" if c.get("checks") == "off" and s["target"] == "leanrpc" else ""),
                c["rpc"] if s["target"] == "leanrpc" else "-",
                str(c["workers"]),
                "on" if c["reuse"] else "off",
                ("py" if c["pure_python"] else "native") if s["target"] == "leanrpc" else "-",
                str(s["requests"]["sent"]),
                str(s["requests"]["answered"]),
                str(s["requests"]["lost"]),
                f"{s['throughput_rps']:.2f}",
                f"{s['ideal_rps']:.2f}",
                f"{s['ratio_to_ideal']:.3f}",
                f"{s['server']['repl_cpu_share']:.2f}",
                _fmt(s["server"].get("repl_busy_share"), 2),
                *(_fmt(s["latency_ms"][k], 1) for k in ("p50", "p90", "p99", "max")),
                *(_fmt(s["overhead_ms"][k], 2) for k in ("p50", "p99")),
                *(_fmt(s["server_internal_ms"][k], 2) for k in ("p50", "p99")),
                f"{s['server']['cpu_percent']:.0f}",
                _fmt(s["server"].get("cpu_ms_per_request"), 2),
                f"{s['server']['rss_mb_max']:.0f}",
                _fmt(s["server"].get("foreign_load_pct"), 0),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    statuses = [
        f"{s['target']}: "
        + ", ".join(f"{k}={v}" for k, v in {**s["statuses"], **s["errors"]}.items())
        for s in summaries
    ]
    return "\n".join(lines + [""] + statuses)


def aggregate(summaries: list[dict]) -> dict:
    """Mean over rounds of one configuration; counts are summed."""
    first = summaries[0]
    out = json.loads(json.dumps(first))
    out["rounds"] = len(summaries)
    for key in ("sent", "recorded", "answered", "failed", "lost", "warm_answers"):
        out["requests"][key] = sum(s["requests"].get(key, 0) for s in summaries)
    for bucket in ("statuses", "errors"):
        merged: dict[str, int] = {}
        for s in summaries:
            for k, v in s[bucket].items():
                merged[k] = merged.get(k, 0) + v
        out[bucket] = merged
    for key in ("throughput_rps", "ideal_rps", "ratio_to_ideal", "duration_s"):
        out[key] = round(statistics.fmean(s[key] for s in summaries), 4)
    for section in ("latency_ms", "repl_ms", "overhead_ms", "server_internal_ms"):
        for k in ("mean", "p50", "p90", "p99", "max"):
            values = [s[section][k] for s in summaries if s[section][k] is not None]
            out[section][k] = round(statistics.fmean(values), 3) if values else None
        out[section]["n"] = sum(s[section]["n"] for s in summaries)
    for k in (
        "cpu_s",
        "cpu_percent",
        "rss_mb_max",
        "repl_cpu_s",
        "repl_rss_mb_max",
        "repl_cpu_share",
        "repl_busy_share",
        "foreign_load_pct",
        "cpu_ms_per_request",
    ):
        values = [s["server"].get(k) for s in summaries if s["server"].get(k) is not None]
        out["server"][k] = round(statistics.fmean(values), 3) if values else None
    out["per_round"] = [
        {
            "throughput_rps": s["throughput_rps"],
            "p50": s["latency_ms"]["p50"],
            "p99": s["latency_ms"]["p99"],
            "started_at": s["started_at"],
            "foreign_load_pct": s["server"].get("foreign_load_pct"),
            "cpu_ms_per_request": s["server"].get("cpu_ms_per_request"),
        }
        for s in summaries
    ]
    return out
