"""PNG plots (matplotlib, imported lazily): throughput/latency bars and worker scaling.

Without matplotlib each plot raises PlotsUnavailable; the commands print one
line and keep their JSON and tables.

May import: nothing from the benchmark.
"""

from __future__ import annotations

from pathlib import Path


class PlotsUnavailable(ImportError):
    """matplotlib is not installed: the plots are skipped, with one line."""


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(
            "matplotlib is not installed (pip install matplotlib, or the test extra: "
            "pip install -e '.[test]')"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput_latency(
    results: dict[str, dict],
    names: list[str],
    labels: list[str],
    path: Path,
    *,
    throughput_title: str,
    latency_title: str,
    ideal_label: str,
) -> Path:
    """Two panels: throughput bars against the first run's ideal, and p50/p99 latency bars."""
    plt = _pyplot()

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.bar(labels, [results[n]["throughput_rps"] for n in names])
    left.axhline(results[names[0]]["ideal_rps"], ls="--", color="gray", label=ideal_label)
    left.set_ylabel("proofs / s")
    left.set_title(throughput_title)
    left.legend(fontsize=8)
    width = 0.38
    xs = range(len(names))

    # A run that answered nothing has None latencies: NaN draws no bar instead of crashing.
    def latency(name: str, key: str) -> float:
        value = results[name]["latency_ms"][key]
        return float("nan") if value is None else value

    right.bar([x - width / 2 for x in xs], [latency(n, "p50") for n in names], width, label="p50")
    right.bar([x + width / 2 for x in xs], [latency(n, "p99") for n in names], width, label="p99")
    right.set_xticks(list(xs), labels)
    right.set_ylabel("latency, ms")
    right.set_yscale("log")
    right.set_title(latency_title)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_scaling(results: dict[str, dict], worker_counts: list[int], out_dir: Path) -> list[Path]:
    plt = _pyplot()

    paths = []
    fig, ax = plt.subplots(figsize=(5, 3.5))
    measured = [results[f"workers={w}"]["throughput_rps"] for w in worker_counts]
    ideal = [results[f"workers={w}"]["ideal_rps"] for w in worker_counts]
    ax.plot(worker_counts, ideal, "--", color="gray", label="ideal: workers / mean REPL time")
    # What the REPLs could do with the CPU they actually got on a shared machine.
    got = [
        results[f"workers={w}"]["ideal_rps"] * results[f"workers={w}"]["server"]["repl_cpu_share"]
        for w in worker_counts
    ]
    ax.plot(worker_counts, got, ":", color="gray", label="ideal x CPU share the REPLs got")
    ax.plot(worker_counts, measured, "o-", label="leanrpc (unary, warm)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("workers")
    ax.set_ylabel("proofs / s")
    ax.set_xticks(worker_counts)
    ax.set_title("Throughput vs workers (REPL stand-in)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out_dir / "scaling_workers.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    top = max(worker_counts)
    names = [f"workers={top}", "streaming", "pure-Python core", "cache miss (reuse=false)"]
    labels = ["unary\nwarm", "stream\nwarm", "pure-Python\ncore", "cache miss\n(reuse=false)"]
    paths.append(
        plot_throughput_latency(
            results,
            names,
            labels,
            out_dir / "scaling_modes.png",
            throughput_title=f"Throughput, {top} workers",
            latency_title="Latency",
            ideal_label="ideal (warm)",
        )
    )
    return paths
