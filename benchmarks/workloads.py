"""Benchmark workloads: real proofs, each with a simulated REPL cost.

Sources (all under the project's shared/ folder, read at run time, zips never unpacked to disk):

* ``kimina``: the 102 Kimina fixture proofs (Goedel Lean-workbook), whose recorded REPL
  ``time`` gives the cost distribution;
* ``minif2f``: DeepSeek-Prover-V2 miniF2F proofs (438, ``import Mathlib`` + ``import Aesop``);
* ``proofnet``: ProofNet-Verified ground-truth proofs (367, ``import Mathlib``);
* ``mixed``: all three, interleaved.

Cost model. Kimina's technical report measures about 3.2 s of REPL time per proof on one core
(9,419 NuminaMath proofs) and about 8 s for a cold ``import Mathlib``. The Kimina fixtures
record per-proof times (0.011 s to 41.8 s, mean 3.83 s, median 1.14 s: heavy-tailed). Each proof
gets a cost from that empirical distribution, rescaled to a mean of 3.2 s, then multiplied by
``scale`` (default 0.02, so 64 ms mean and 160 ms per cold import) so runs fit on 2 cores in
minutes with the same shape. Kimina fixtures keep their own recorded time; other proofs get the
quantile matching their length rank (longer proofs cost more), so a workload's costs are a
deterministic function of its files. The cost reaches the stand-in as a directive line
``--@standin: burn=SECONDS`` (a Lean comment; the stand-in burns that much CPU and ignores the
line for replay keys), appended to the body.

This module is stdlib-only so the peer runners (another virtualenv) can import it.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import zipfile
from pathlib import Path

__all__ = [
    "Item",
    "PAPER_MEAN_PROOF_S",
    "PAPER_IMPORT_S",
    "DEFAULT_SCALE",
    "SOURCES",
    "shared_dir",
    "kimina_times",
    "load",
    "import_cost",
    "dump_jsonl",
    "read_jsonl",
]

PAPER_MEAN_PROOF_S = 3.2
PAPER_IMPORT_S = 8.0
DEFAULT_SCALE = 0.02
SOURCES = ("kimina", "minif2f", "proofnet", "mixed")


@dataclasses.dataclass
class Item:
    id: str
    code: str  # proof text with the burn directive
    burn_s: float  # simulated REPL CPU seconds for the body
    source: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class SharedNotFound(FileNotFoundError):
    """The project's shared/ folder (datasets/, fixtures/) cannot be found: one line, no traceback."""


def shared_dir(start: Path | None = None) -> Path:
    """The project's shared/ folder: $LEANRPC_SHARED, else the first shared/
    (with fixtures/) above `start` (default: this file). SharedNotFound else."""
    env = os.environ.get("LEANRPC_SHARED")
    if env:
        path = Path(env).expanduser()
        if not ((path / "datasets").is_dir() or (path / "fixtures").is_dir()):
            raise SharedNotFound(
                f"LEANRPC_SHARED={env} has no datasets/ or fixtures/ folder; "
                "point it at the project's shared/ folder"
            )
        return path
    here = (start or Path(__file__)).resolve()
    for parent in here.parents:
        candidate = parent / "shared"
        if (candidate / "fixtures").is_dir():
            return candidate
    raise SharedNotFound(
        "the project's shared/ folder (datasets/, fixtures/) is not above this checkout; "
        "set LEANRPC_SHARED=/path/to/shared"
    )


def no_data(what: str):
    """Stops a benchmark that has nothing to measure: one clear line on stderr, exit status 1."""
    where = os.environ.get("LEANRPC_SHARED") or "the first shared/ above benchmarks/"
    raise SystemExit(
        f"benchmark stopped: no data: {what} (shared folder: {where}; "
        "set LEANRPC_SHARED to the folder holding datasets/ and fixtures/)"
    )


def require_data(items, what: str):
    """`items`, or the benchmark stops with one clear line when there are none (issue 28 item 6)."""
    if not items:
        no_data(f"0 {what}")
    return items


def _kimina_dir() -> Path:
    return shared_dir() / "fixtures" / "kimina" / "match"


def kimina_times() -> dict[str, float | None]:
    """Recorded REPL time of each Kimina fixture, by file stem; None for recorded timeouts."""
    times: dict[str, float | None] = {}
    for path in sorted((_kimina_dir() / "output").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))["results"][0]
        response = result.get("response") or {}
        times[path.stem] = response.get("time") if isinstance(response, dict) else None
    return times


def _distribution() -> list[float]:
    """Sorted per-proof costs in seconds, rescaled to the paper's mean."""
    recorded = sorted(t for t in kimina_times().values() if t is not None)
    factor = PAPER_MEAN_PROOF_S / (sum(recorded) / len(recorded))
    return [t * factor for t in recorded]


def _quantile(sorted_costs: list[float], q: float) -> float:
    position = q * (len(sorted_costs) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_costs) - 1)
    return sorted_costs[low] + (sorted_costs[high] - sorted_costs[low]) * (position - low)


def _with_burn(code: str, burn_s: float) -> str:
    return code.rstrip("\n") + f"\n--@standin: burn={burn_s:.6f}\n"


def _read_zip(path: Path, prefix_filter: str = "") -> list[tuple[str, str]]:
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".lean") and prefix_filter in n)
        return [(n, archive.read(n).decode("utf-8")) for n in names]


def _raw(source: str) -> list[tuple[str, str]]:
    root = shared_dir() / "datasets"
    if source == "kimina":
        return [
            (p.stem, p.read_text(encoding="utf-8"))
            for p in sorted((_kimina_dir() / "input").glob("*.lean"))
        ]
    if source == "minif2f":
        files = _read_zip(root / "proofs-deepseek-prover-v2-minif2f" / "minif2f-solutions.zip")
        return [("minif2f-" + n.replace("/", "-").removesuffix(".lean"), text) for n, text in files]
    if source == "proofnet":
        files = _read_zip(root / "proofs-proofnet-verified" / "proofnet-verified_gt.zip")
        return [(Path(n).stem, text) for n, text in files]
    raise ValueError(f"unknown workload source {source!r}; choose from {', '.join(SOURCES)}")


def _costed(source: str, scale: float) -> list[Item]:
    costs = _distribution()
    raw = _raw(source)
    items: list[Item] = []
    if source == "kimina":
        recorded = kimina_times()
        factor = PAPER_MEAN_PROOF_S / (
            sum(t for t in recorded.values() if t is not None) / len(costs)
        )
        # A recorded timeout is the tail: give it the slowest recorded cost.
        slowest = costs[-1]
        for name, code in raw:
            t = recorded.get(name)
            cost = t * factor if t is not None else slowest
            items.append(Item(name, "", cost * scale, source))
            items[-1].code = _with_burn(code, items[-1].burn_s)
        return items
    lengths = sorted(len(code) for _, code in raw)
    for name, code in raw:
        rank = bisect.bisect_left(lengths, len(code))
        q = rank / max(1, len(lengths) - 1)
        burn_s = _quantile(costs, q) * scale
        items.append(Item(name, _with_burn(code, burn_s), burn_s, source))
    return items


def load(source: str = "kimina", *, scale: float = DEFAULT_SCALE, limit: int = 0) -> list[Item]:
    """Items of a workload, in a fixed order.

    Args:
        source: one of SOURCES.
        scale: factor applied to the paper-scale costs (1.0 = real Lean timings).
        limit: keep only the first ``limit`` items (0 = all).
    Returns:
        Items with unique ids; ``mixed`` interleaves the three sources round-robin.
    """
    if scale <= 0:
        raise ValueError("scale must be positive")
    try:
        if source == "mixed":
            parts = [_costed(s, scale) for s in ("kimina", "minif2f", "proofnet")]
            items = [
                part[i] for i in range(max(map(len, parts))) for part in parts if i < len(part)
            ]
        else:
            items = _costed(source, scale)
    except SharedNotFound:
        raise  # no shared/ folder at all: the command's one usage line (benchmarks/cli.py)
    except (FileNotFoundError, ZeroDivisionError) as exc:  # a missing dataset or fixture folder
        no_data(f"workload {source!r}: its files are missing ({type(exc).__name__}: {exc})")
    return require_data(items[:limit] if limit else items, f"items in workload {source!r}")


def import_cost(scale: float = DEFAULT_SCALE) -> float:
    """Stand-in ``--import-cost`` matching the paper's cold ``import Mathlib`` at this scale."""
    return PAPER_IMPORT_S * scale


def split_imports(code: str) -> tuple[str, str]:
    """(leading import/blank lines, the rest): the header split Kimina and LeanInteract users make."""
    lines = code.split("\n")
    cut = 0
    while cut < len(lines) and (
        not lines[cut].strip() or lines[cut].lstrip().startswith("import ")
    ):
        cut += 1
    return "\n".join(line for line in lines[:cut] if line.strip()), "\n".join(lines[cut:])


def classify(messages: list[dict] | None, sorries: list | None = None) -> str:
    """Verdict of a raw REPL response, as leanrpc names it (VALID, INVALID, SORRY)."""
    messages = messages or []
    if any(m.get("severity") == "error" for m in messages):
        return "INVALID"
    if sorries or any("declaration uses 'sorry'" in (m.get("data") or "") for m in messages):
        return "SORRY"
    return "VALID"


def dump_jsonl(items: list[Item], path: str | os.PathLike) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")


def read_jsonl(path: str | os.PathLike) -> list[Item]:
    with open(path, encoding="utf-8") as f:
        return [Item(**json.loads(line)) for line in f if line.strip()]
