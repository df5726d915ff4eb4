"""Native core vs its pure-Python twin: framing and prefix-trie throughput.

    python benchmarks/studies/native_bench.py            # table
    python benchmarks/studies/native_bench.py --json     # machine-readable
    python benchmarks/studies/native_bench.py --quick    # smaller inputs, a smoke run

Compares leanrpc._native.{framing,trie} with leanrpc.core.{framing,trie}_py,
imported directly (the facades' choice does not matter). Inputs are
synthetic but shaped like the real thing:

* framing: REPL responses carrying infotrees of several MB, pretty-printed the
  way Lean prints JSON (width 80, one space of indent per level), fed in
  64 KiB chunks as a pipe delivers them; measured with and without
  decode_frame, plus a stream of small command responses;
* trie: 100k stored command texts (~1.5k characters, Lean syntax with
  non-ASCII symbols) that share long prefixes the way proof attempts do, and
  lookups of continuations and diverging edits.

Every timing is the best of a few repeats. The project's goal is native >= 10x
python on both; the ratio column reports what this machine measured.
"""

import argparse
import gc
import json
import os
import platform
import random
import sys
import time

from leanrpc._native import framing as native_framing
from leanrpc._native import trie as native_trie
from leanrpc.core import framing_py, trie_py

CHUNK = 64 * 1024


# -- inputs --------------------------------------------------------------------------

_TACTICS = [
    "simp only [Nat.add_comm, Nat.mul_comm] at h ⊢",
    "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b), mul_pos ha hb]",
    "rw [Finset.sum_range_succ, ih]",
    "norm_num [Real.sqrt_eq_iff, abs_le] at *",
    "intro x hx",
    "constructor",
    "· exact le_of_lt h₀",
    "obtain ⟨k, hk⟩ := h₁",
    "field_simp [ne_of_gt hx]",
    "ring_nf",
    "omega",
    "have h₂ : ∀ n : ℕ, f (n + 1) ≤ f n := by\n    intro n\n    linarith [h₀ n]",
    "exact ⟨by positivity, by linarith⟩",
    "apply mul_le_mul_of_nonneg_left <;> positivity",
    "rcases Nat.even_or_odd n with ⟨m, rfl⟩ | ⟨m, rfl⟩",
]
_TERMS = [
    "x",
    "y",
    "a",
    "b",
    "n",
    "f x",
    "Real.sqrt 2",
    "(x + 1)",
    "∑ i ∈ Finset.range n, i",
    "|a - b|",
    "π",
]
_RELATIONS = ["≤", "<", "=", "≠", "∣"]


def lean_render(value, indent=0, width=80) -> str:
    """JSON the way Lean's printer lays it out (shared/REPL-PROTOCOL.md section 3)."""
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(compact) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return compact
    pad = ",\n" + " " * (indent + 1)
    if isinstance(value, list):
        return "[" + pad.join(lean_render(item, indent + 1, width) for item in value) + "]"
    items = []
    for key, item in value.items():
        head = json.dumps(key, ensure_ascii=False) + ": "
        flat = json.dumps(item, ensure_ascii=False, separators=(", ", ": "))
        if len(flat) + len(head) + indent + 1 <= width:
            items.append(head + flat)
        else:
            items.append(
                head.rstrip() + "\n" + " " * (indent + 1) + lean_render(item, indent + 1, width)
            )
    return "{" + pad.join(items) + "}"


def _goal(rng: random.Random) -> str:
    hyps = "\n".join(
        f"h{i} : {rng.choice(_TERMS)} {rng.choice(_RELATIONS)} {rng.choice(_TERMS)}"
        for i in range(rng.randint(1, 6))
    )
    return f"x y : ℝ\n{hyps}\n⊢ {rng.choice(_TERMS)} {rng.choice(_RELATIONS)} {rng.choice(_TERMS)}"


def _info_node(rng: random.Random, depth: int, line: list) -> dict:
    line[0] += 1
    tactic = rng.choice(_TACTICS)
    children = []
    if depth < 7:
        children = [_info_node(rng, depth + 1, line) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    return {
        "node": {
            "stx": {
                "range": {
                    "synthetic": False,
                    "start": {"line": line[0], "column": 2 * depth},
                    "finish": {"line": line[0], "column": 2 * depth + len(tactic)},
                },
                "pp": tactic,
                "kind": "Lean.Parser.Tactic.tacticSeq1Indented",
                "argKinds": ["Lean.Parser.Tactic.tacticSeq"],
            },
            "name": "Lean.Parser.Tactic.tacticSeq",
            "goalsBefore": [_goal(rng) for _ in range(rng.randint(1, 2))],
            "goalsAfter": [_goal(rng) for _ in range(rng.randint(0, 2))],
        },
        "kind": "TacticInfo",
        "children": children,
    }


def infotree_response(rng: random.Random, size: int, env: int) -> bytes:
    """One REPL response of about `size` bytes, ending in the blank line."""
    trees = []
    text = ""
    line = [0]
    while len(text) < size:
        batch = [_info_node(rng, 0, line) for _ in range(20)]
        trees += batch
        text = lean_render({"messages": [], "infotree": trees, "env": env})
    return (text + "\n\n").encode("utf-8")


def small_responses(rng: random.Random, count: int) -> bytes:
    parts = []
    for env in range(count):
        response = {
            "sorries": [
                {
                    "proofState": env,
                    "pos": {"line": 3, "column": 4},
                    "goal": _goal(rng),
                    "endPos": {"line": 3, "column": 9},
                }
            ]
            if rng.random() < 0.3
            else [],
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 5, "column": 2},
                    "endPos": {"line": 5, "column": 9},
                    "data": "unsolved goals\n" + _goal(rng),
                }
            ]
            if rng.random() < 0.5
            else [],
            "env": env,
        }
        parts.append(lean_render({k: v for k, v in response.items() if v != []}) + "\n\n")
    return "".join(parts).encode("utf-8")


def chunks_of(stream: bytes, size: int = CHUNK) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def command_corpus(rng: random.Random, theorems: int, attempts: int) -> list[str]:
    """Proof attempts: a statement, then tactic lines; attempts branch off earlier ones."""
    commands = []
    for t in range(theorems):
        hyps = " ".join(
            f"(h{i} : {rng.choice(_TERMS)} {rng.choice(_RELATIONS)} {rng.choice(_TERMS)})"
            for i in range(rng.randint(4, 10))
        )
        statement = (
            f"/-- Problem {t}: show the bound. -/\ntheorem problem_{t} (x y a b : ℝ) (n : ℕ) (f : ℕ → ℝ)\n    {hyps} :\n"
            f"    {rng.choice(_TERMS)} {rng.choice(_RELATIONS)} {rng.choice(_TERMS)} := by\n"
        )
        tries = [statement]
        for _ in range(attempts):
            base = rng.choice(tries)
            cut = rng.randint(len(statement), len(base))
            cut = base.rfind("\n", 0, cut) + 1 if cut > len(statement) else len(statement)
            steps = "".join(f"  {rng.choice(_TACTICS)}\n" for _ in range(rng.randint(8, 24)))
            tries.append(base[:cut] + steps)
        commands += tries[1:]
    return commands


# -- measurements ----------------------------------------------------------------------


def best_of(repeats: int, run) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def bench_framing(module, chunks: list[bytes], total: int, repeats: int, decode: bool) -> float:
    def run():
        decoder = module.FrameDecoder(max_frame=256 * 2**20)
        decode_frame = module.decode_frame
        feed = decoder.feed
        count = 0
        for chunk in chunks:
            for frame in feed(chunk):
                if decode:
                    decode_frame(frame)
                count += 1
        assert count > 0 and decoder.buffered == 0

    return total / best_of(repeats, run) / 1e6


def bench_trie(
    module, keys: list[str], longest_queries: list[str], common_queries: list[str], repeats: int
) -> dict:
    gc.collect()
    start = time.perf_counter()
    trie = module.PrefixTrie()
    for i, key in enumerate(keys):
        trie.insert(key, i)
    built = time.perf_counter() - start

    def longest():
        lookup = trie.longest_prefix
        for query in longest_queries:
            lookup(query)

    def common():
        lookup = trie.common_prefix_length
        for query in common_queries:
            lookup(query)

    result = {
        "insert": len(keys) / built,
        "longest_prefix": len(longest_queries) / best_of(repeats, longest),
        "common_prefix_length": len(common_queries) / best_of(repeats, common),
    }
    answers = (
        [trie.longest_prefix(q) for q in longest_queries[:500]],
        [trie.common_prefix_length(q) for q in common_queries[:500]],
    )
    return result, answers


def run(quick: bool) -> dict:
    rng = random.Random(20240601)
    frame_size = (1 if quick else 4) * 2**20
    frames = 2 if quick else 4
    big = b"".join(infotree_response(rng, frame_size, env) for env in range(frames))
    small = small_responses(rng, 2000 if quick else 20000)
    repeats = 2 if quick else 3
    rows = []
    for label, stream, decode in (
        (f"framing: {frames} x {frame_size >> 20} MiB infotree responses, feed", big, False),
        (
            f"framing: {frames} x {frame_size >> 20} MiB infotree responses, feed + decode_frame",
            big,
            True,
        ),
        ("framing: small command responses, feed", small, False),
        ("framing: small command responses, feed + decode_frame", small, True),
    ):
        chunks = chunks_of(stream)
        assert [framing_py.decode_frame(f) for f in framing_py.FrameDecoder().feed(stream)] == [
            native_framing.decode_frame(f) for f in native_framing.FrameDecoder().feed(stream)
        ]
        python = bench_framing(framing_py, chunks, len(stream), repeats, decode)
        native = bench_framing(native_framing, chunks, len(stream), repeats, decode)
        rows.append(
            {
                "benchmark": label,
                "unit": "MB/s",
                "python": python,
                "native": native,
                "ratio": native / python,
            }
        )

    theorems, attempts = (100, 100) if quick else (500, 200)
    keys = command_corpus(rng, theorems, attempts)
    mean_length = sum(map(len, keys)) / len(keys)
    sample = rng.sample(keys, min(20000, len(keys)))
    longest_queries = [key + f"  {rng.choice(_TACTICS)}\n" for key in sample]
    common_queries = []
    for key in sample:
        cut = rng.randint(len(key) // 2, len(key))
        common_queries.append(key[:cut] + f"  {rng.choice(_TACTICS)}\n")
    results = {}
    answers = {}
    for name, module in (("python", trie_py), ("native", native_trie)):
        results[name], answers[name] = bench_trie(
            module, keys, longest_queries, common_queries, repeats
        )
    assert answers["python"] == answers["native"]
    for op in ("longest_prefix", "common_prefix_length", "insert"):
        python = results["python"][op]
        native = results["native"][op]
        rows.append(
            {
                "benchmark": f"trie: {len(keys) // 1000}k commands (mean {mean_length:.0f} chars), {op}",
                "unit": "ops/s",
                "python": python,
                "native": native,
                "ratio": native / python,
            }
        )
    # The worker's own use: a history of the last 64 commands, queried with
    # each new command (shared/STYLE.md; leanrpc.worker).
    history = rng.sample(keys, 64)
    queries = [
        rng.choice(history)[: rng.randint(200, 1000)] + f"  {rng.choice(_TACTICS)}\n"
        for _ in range(20000)
    ]
    small = {}
    for name, module in (("python", trie_py), ("native", native_trie)):
        small[name], _ = bench_trie(module, history, queries, queries, repeats)
    for op in ("common_prefix_length",):
        rows.append(
            {
                "benchmark": f"trie: 64 commands (a worker's history), {op}",
                "unit": "ops/s",
                "python": small["python"][op],
                "native": small["native"][op],
                "ratio": small["native"][op] / small["python"][op],
            }
        )
    return {
        "command": "python benchmarks/studies/native_bench.py" + (" --quick" if quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "python": sys.version.split()[0],
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quick", action="store_true", help="smaller inputs (smoke test)")
    args = parser.parse_args()
    started = time.perf_counter()
    report = run(args.quick)
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['command']}  ({report['date']}; {report['machine']}; Python {report['python']})"
    )
    print()
    print("| benchmark | unit | python | native | native/python |")
    print("| --- | --- | ---: | ---: | ---: |")
    for row in report["rows"]:
        print(
            f"| {row['benchmark']} | {row['unit']} | {row['python']:,.0f} | {row['native']:,.0f} | {row['ratio']:.1f}x |"
        )
    print()
    print(f"total {report['seconds']} s")


if __name__ == "__main__":
    main()
