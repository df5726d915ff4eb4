"""Autoformalization evaluation: informal statement -> Formalize repair loop -> metrics.

    python benchmarks/formalize_eval.py --dataset minif2f --limit 5 --tiny --verify standin
    python benchmarks/formalize_eval.py --dataset proofnet-verified --model-dir /models/Qwen3-Coder-30B-A3B-Instruct \\
        --adapter /adapters/formalizer-dora --verify repl --repl-cmd "lake env /opt/repl/.lake/build/bin/repl" \\
        --repl-cwd /opt/mathlib-project --samples 4 --temperature 0.7 --retrieval

Datasets (shared/datasets, see their READMEs):
  minif2f            minif2f-proofnet-putnam-goedel-prover/minif2f.jsonl (Lean v4.9 Mathlib; --split test|valid|all)
  proofnet-verified  proofnet-verified/proofnet-verified.jsonl (Lean v4.28; the corrected references)

Generators: `model` (the configured or --tiny model through FormalizeService and its
batched engine), `oracle` (answers the reference statement: a harness self-test,
compile@1 should equal the verifier's acceptance of the references), and
`oracle-repair` (first answer ill-formed, then the reference: exercises the loop).

Verifiers: `standin` (python -m leanrpc.standin; type-checks nothing), `repl`
(--repl-cmd in --repl-cwd: a real Lean REPL), `none` (every well-formed
candidate counts as SORRY; only for timing the model).

Metrics are defined in leanrpc/formalize/metrics.py. Prints one JSON object;
--out also writes it to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import platform
import resource
import shlex
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from leanrpc.formalize.config import DEFAULT_MATHLIB_NAMES, FormalizeConfig  # noqa: E402
from leanrpc.formalize.generation import GenerationResult, SamplingParams  # noqa: E402
from leanrpc.formalize.metrics import RunRecord, summarize  # noqa: E402
from leanrpc.formalize.types import Candidate, FormalizeRequest, Outcome, Sampling  # noqa: E402
from leanrpc.results import Status, VerifyResult  # noqa: E402

_CHECKOUT_DATASETS = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DATASETS = pathlib.Path(
    os.environ.get("LEANRPC_DATASETS")
    or (
        pathlib.Path(os.environ["LEANRPC_SHARED"]) / "datasets"
        if os.environ.get("LEANRPC_SHARED")
        else _CHECKOUT_DATASETS
    )
)


# ----------------------------------------------------------------------------- data


def _no_data(what: str):
    """One clear line and exit status 1 (as benchmarks.workloads.no_data, which this script cannot import)."""
    raise SystemExit(f"benchmark stopped: no data: {what} (set LEANRPC_SHARED or LEANRPC_DATASETS)")


def _lines(path: pathlib.Path) -> list[str]:
    if not path.is_file():
        _no_data(f"{path} is missing")
    return path.read_text().splitlines()


def load_problems(name: str, split: str, limit: int | None, offset: int = 0) -> list[dict]:
    rows = []
    if name == "minif2f":
        path = DATASETS / "minif2f-proofnet-putnam-goedel-prover" / "minif2f.jsonl"
        for line in _lines(path):
            d = json.loads(line)
            if split != "all" and d["split"] != split:
                continue
            informal = d["informal_prefix"].strip().removeprefix("/--").removesuffix("-/").strip()
            rows.append(
                {
                    "name": d["name"],
                    "informal": informal,
                    "header": d["header"].strip(),
                    "reference": d["formal_statement"].rstrip() + " sorry",
                }
            )
    elif name == "proofnet-verified":
        path = DATASETS / "proofnet-verified" / "proofnet-verified.jsonl"
        for line in _lines(path):
            d = json.loads(line)
            header = d["header"].strip() + (
                "\n\n" + d["helper"].strip() if d.get("helper", "").strip() else ""
            )
            rows.append(
                {
                    "name": d["name"],
                    "informal": d["informal_stmt"].strip(),
                    "header": header,
                    "reference": d["formal_stmt"].strip(),
                }
            )
    else:
        raise SystemExit(f"unknown dataset {name!r}")
    rows = rows[offset:]
    rows = rows[:limit] if limit else rows
    if not rows:
        _no_data(f"0 {name} problems (split {split}, offset {offset}) in {DATASETS}")
    return rows


# ----------------------------------------------------------------------------- oracles


class _OracleStream:
    def __init__(self, text: str) -> None:
        self.text = text

    def cancel(self) -> None:
        pass

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        await asyncio.sleep(0)
        yield self.text

    async def result(self) -> GenerationResult:
        return GenerationResult(
            text=self.text,
            token_ids=[],
            finish_reason="eos",
            prompt_tokens=0,
            generated_tokens=len(self.text) // 4,
        )


class OracleGenerator:
    """Answers the reference statement of the problem named in the prompt."""

    description = "oracle"

    def __init__(self, problems: list[dict], *, break_first: bool) -> None:
        self.by_informal = {p["informal"]: p["reference"] for p in problems}
        self.break_first = break_first

    def submit_chat(self, messages, assistant_prefix, params: SamplingParams):
        task = messages[1]["content"]
        ref = next((r for inf, r in self.by_informal.items() if inf in task), "")
        if self.break_first and len(messages) == 2:
            ref = ref.rsplit(":=", 1)[0]  # drop the proof: not well-formed
        return _OracleStream(ref)


async def verify_none(code: str) -> VerifyResult:
    return VerifyResult(id="", status=Status.SORRY)


# ----------------------------------------------------------------------------- run


async def run_eval(args) -> dict:
    from leanrpc.services.formalize import FormalizeService

    problems = load_problems(args.dataset, args.split, args.limit, args.offset)
    references = {p["name"]: p["reference"] for p in problems}
    verifier = None
    if args.verify in ("standin", "repl"):
        # The real Verify service over a pool of REPL workers (the stand-in by default).
        from leanrpc.config import Config
        from leanrpc.pool.pool import Pool
        from leanrpc.services.verify import VerifyOptions, VerifyService

        vconfig = Config()
        vconfig.cache.enabled = False  # each candidate is checked by the REPL, as before
        vconfig.pool.workers = args.verify_workers
        vconfig.pool.default_timeout_s = args.verify_timeout
        if args.verify == "repl":
            if not args.repl_cmd:
                raise SystemExit("--verify repl needs --repl-cmd")
            vconfig.repl.command = shlex.split(args.repl_cmd)
            vconfig.repl.cwd = args.repl_cwd
        verifier = Pool(vconfig)
        await verifier.start()
        service_v = VerifyService(verifier, vconfig)

        async def verify(code: str):
            return await service_v.verify("formalize-eval", code, VerifyOptions())
    else:
        verify = verify_none

    config = FormalizeConfig(
        model_dir=args.model_dir,
        adapter_dirs=args.adapter,
        device=args.device,
        quantize=not args.no_quantize,
        max_batch=args.max_batch,
        max_new_tokens=args.max_new_tokens,
        default_max_iterations=args.max_iterations,
        max_iterations_limit=max(16, args.max_iterations),
        mathlib_names_path=args.names or DEFAULT_MATHLIB_NAMES,
        retrieval_top_k=args.retrieval_top_k,
    )
    t_load = time.perf_counter()
    tmp = None
    if args.generator == "model":
        if args.tiny:
            from leanrpc.formalize.tiny import build_tiny_checkpoint

            tmp = tempfile.TemporaryDirectory(prefix="tiny-qwen3-moe-")
            config.model_dir = str(build_tiny_checkpoint(tmp.name))
        if not config.model_dir:
            raise SystemExit("--generator model needs --model-dir or --tiny")
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
        except ImportError:
            torch = None
        service = FormalizeService.from_config(config, verify)
        ok, reason = service.serving_status()
        if not ok:
            raise SystemExit(reason)
    else:
        service = FormalizeService(
            OracleGenerator(problems, break_first=args.generator == "oracle-repair"), verify, config
        )
    load_s = time.perf_counter() - t_load

    samples = args.samples
    temperature = (
        args.temperature if args.temperature is not None else (0.7 if samples > 1 else 0.0)
    )
    sem = asyncio.Semaphore(args.concurrency or args.max_batch)
    records: list[RunRecord] = []

    async def one(problem: dict, sample: int) -> None:
        async with sem:
            t0 = time.perf_counter()
            req = FormalizeRequest(
                id=f"{problem['name']}#{sample}",
                informal_statement=problem["informal"],
                header=problem["header"],
                max_iterations=args.max_iterations,
                retrieval=args.retrieval,
                sampling=Sampling(
                    temperature=temperature, top_p=args.top_p, seed=(args.seed + sample) or 0
                ),
            )
            cands: list[Candidate] = []
            outcome = None
            async for ev in service.formalize(req):
                if isinstance(ev, Candidate):
                    cands.append(ev)
                elif isinstance(ev, Outcome):
                    outcome = ev
            records.append(
                RunRecord(problem["name"], sample, outcome, cands, time.perf_counter() - t0)
            )
            if args.verbose:
                print(
                    f"{req.id}: {outcome.status.name} after {outcome.iterations}", file=sys.stderr
                )

    from leanrpc.formalize.gpumon import GpuMonitor

    monitor = GpuMonitor().start()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(p, s) for p in problems for s in range(samples)))
    wall = time.perf_counter() - t0
    gpu = monitor.stop()

    gen_tokens = sum(r.outcome.generated_tokens for r in records)
    goal_matches = None
    if args.verify == "repl":
        # goal_exact_match is asked of the real REPL (the stand-in does not elaborate)
        from leanrpc.formalize.goalmatch import compare_goals

        headers = {p["name"]: p["header"] for p in problems}
        goal_matches = {}
        for r in records:
            if r.sample == 0 and r.solved:
                goal_matches[r.problem] = await compare_goals(
                    r.outcome.lean_statement, references[r.problem], headers[r.problem], verify
                )
    summary = summarize(
        records,
        references,
        samples=samples,
        max_iterations=args.max_iterations,
        goal_matches=goal_matches,
        generated_tokens=gen_tokens,
        wall_s=wall,
        gpu=gpu,
    )
    engine = service.info().get("engine", {})
    peak = {"cpu_max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    if args.generator == "model" and torch is not None and torch.cuda.is_available():
        peak["cuda_max_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
    summary.update(
        {
            "decode_tokens_per_s": engine.get("decode_tokens_per_s"),
            "mean_batch": engine.get("mean_batch"),
            "generated_tokens": gen_tokens,
            "wall_s": round(wall, 2),
            "load_s": round(load_s, 2),
            "peak_memory": peak,
            "model": service.model_info,
            "setup": {
                "dataset": args.dataset,
                "split": args.split,
                "limit": args.limit,
                "offset": args.offset,
                "generator": args.generator,
                "tiny": args.tiny,
                "model_dir": None if args.tiny else args.model_dir,
                "adapters": args.adapter,
                "verify": args.verify,
                "max_iterations": args.max_iterations,
                "samples": samples,
                "temperature": temperature,
                "top_p": args.top_p,
                "retrieval": args.retrieval,
                "max_new_tokens": args.max_new_tokens,
                "max_batch": args.max_batch,
                "device": args.device,
                "quantize": not args.no_quantize,
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
        }
    )
    await service.close()
    if verifier is not None:
        await verifier.close()
    if tmp is not None:
        tmp.cleanup()
    return summary


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("minif2f", "proofnet-verified"), default="minif2f")
    p.add_argument("--split", default="test", help="minif2f split: test, valid or all")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--generator", choices=("model", "oracle", "oracle-repair"), default="model")
    p.add_argument("--model-dir")
    p.add_argument("--tiny", action="store_true", help="build and use the tiny random-init model")
    p.add_argument("--adapter", action="append", default=[], help="PEFT adapter dir (repeatable)")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-quantize", action="store_true")
    p.add_argument("--verify", choices=("standin", "repl", "none"), default="standin")
    p.add_argument("--repl-cmd", help='e.g. "lake env /path/to/repl"')
    p.add_argument("--repl-cwd")
    p.add_argument("--verify-workers", type=int, default=2, help="REPL workers in the verify pool")
    p.add_argument("--verify-timeout", type=float, default=120.0)
    p.add_argument("--max-iterations", type=int, default=5)
    p.add_argument("--samples", type=int, default=1, help="runs per problem (any_sample@S)")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=0, help="jobs in flight (default: max-batch)")
    p.add_argument("--retrieval", action="store_true", help="System B in the first prompt")
    p.add_argument("--retrieval-top-k", type=int, default=8)
    p.add_argument("--names", help="Mathlib names TSV (System A/B)")
    p.add_argument("--out")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(run_eval(args))
    text = json.dumps(summary, indent=1, ensure_ascii=False)
    print(text)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
