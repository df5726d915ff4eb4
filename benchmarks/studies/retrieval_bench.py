"""System B measured: the share of a gold statement's Mathlib identifiers that retrieval puts in the top k.

For each problem (miniF2F, ProofNet-Verified) the gold identifiers are the
tokens of the reference formal statement that are Mathlib declaration names
(mathlib_decls.tsv; `Real.sqrt`, `Finset.range`, `IsOpen`, …). The query is the
informal statement. Per problem: |gold ∩ top-k| / |gold|; averaged over the
problems with at least one gold identifier. Modes, side by side in one run:

  none         no retrieval (nothing in the prompt): 0 by construction
  bm25         BM25 alone over all declarations (MathlibNames.search, dense off)
  dense        the dense stage alone (embedding cosine top-k), for reference
  dense+bm25   dense top 100, BM25 rerank to k (the design; the server's path when
               formalize.retrieval_embedder is set)

    python benchmarks/studies/retrieval_bench.py [--k 8] [--embedder wordllama] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 2)[0])  # benchmarks/ (formalize_eval)
from formalize_eval import load_problems  # noqa: E402

from leanrpc.formalize.config import DEFAULT_MATHLIB_NAMES  # noqa: E402
from leanrpc.formalize.dense import make_embedder  # noqa: E402
from leanrpc.formalize.retrieval import MathlibNames  # noqa: E402

_IDENT = re.compile(r"(?<![\w.'])[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def gold_identifiers(statement: str, names: MathlibNames) -> set[str]:
    body = statement.split(":=", 1)[0]
    return {
        t
        for t in _IDENT.findall(body)
        if t in names and "." in t or (t in names and t[0].isupper())
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--embedder", default="wordllama")
    p.add_argument("--limit", type=int)
    p.add_argument("--cache-dir")
    args = p.parse_args(argv)
    names = MathlibNames.from_tsv(DEFAULT_MATHLIB_NAMES)
    t0 = time.perf_counter()
    names.enable_dense(make_embedder(args.embedder), args.cache_dir)
    embed_s = time.perf_counter() - t0
    out: dict = {
        "k": args.k,
        "embedder": args.embedder,
        "embed_or_cache_s": round(embed_s, 1),
        "from_cache": names.dense.from_cache,
    }
    for dataset, split in (("minif2f", "all"), ("proofnet-verified", "test")):
        problems = load_problems(dataset, split, args.limit)
        shares = {"none": [], "bm25": [], "dense": [], "dense+bm25": []}
        timing = {m: 0.0 for m in shares}
        for prob in problems:
            gold = gold_identifiers(prob["reference"], names)
            if not gold:
                continue
            shares["none"].append(0.0)
            for mode in ("bm25", "dense", "dense+bm25"):
                t = time.perf_counter()
                if mode == "bm25":
                    top = {n for n, _, _ in names.search(prob["informal"], args.k, dense=False)}
                elif mode == "dense":
                    idx, _ = names.dense.top(prob["informal"], args.k)
                    top = {names.names[i] for i in idx}
                else:
                    top = {n for n, _, _ in names.search(prob["informal"], args.k)}
                timing[mode] += time.perf_counter() - t
                shares[mode].append(len(gold & top) / len(gold))
        n = len(shares["none"])
        out[dataset] = {
            "problems": len(problems),
            "with_gold": n,
            **{m: round(sum(v) / n, 4) if n else None for m, v in shares.items()},
            "any_hit": {
                m: round(sum(x > 0 for x in v) / n, 4) if n else None for m, v in shares.items()
            },
            "ms_per_query": {
                m: round(1000 * t / max(1, n), 1) for m, t in timing.items() if m != "none"
            },
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
