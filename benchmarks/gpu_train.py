"""One short GPU call: SFT and GRPO steps, then the evaluation, on the real architecture at reduced depth.

The model is Qwen3-Coder-30B-A3B's architecture (hidden 2048, 128 experts with 8
active, moe_intermediate 768, the real 151,936-token vocabulary) with `--layers`
decoder layers (default 4 of 48), random init, built straight into NF4 on the GPU
(skeleton.build_random_nf4: no bf16 copy), unfused, with the published adapter
(attention r=64/a=128, experts r=8/a=16; `--dora` for DoRA). Random weights say
nothing about quality; the figures are speed and memory:

  sft    `--steps` SFTTrainer steps (completion-only loss, bf16, gradient
         checkpointing, micro-batch `--micro-batch`) on miniF2F pairs
  grpo   `--steps` GRPOTrainer steps (group `--group`, completions up to
         `--completion-tokens`), rewarded by a leanrpc server on the stand-in
         started in this process, through the client's LeanReward(kind=formalization)
  eval   the repair loop (FormalizeService over the trained model, stand-in
         Verify) on `--problems` miniF2F problems, and the nine metrics

Each stage reports wall time, tokens/s, and NVML peak VRAM and utilisation
(formalize/gpumon.py). Prints one JSON object; `--out` writes it too.

    python benchmarks/gpu_train.py --layers 4 --steps 2 --out $OUT/gpu_train.json
    python benchmarks/gpu_train.py --smoke --layers 2 --steps 1 --micro-batch 1 --group 2 \
        --completion-tokens 4 --problems 1     # CPU, tiny widths: the script runs end to end

Budget: about 4-6 minutes on one H100 (model build ~1 min at 4 layers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _server_in_thread():
    """A leanrpc server on the stand-in, on its own loop thread; returns (address, stop)."""
    from leanrpc.app import create_server
    from leanrpc.config import Config

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    config = Config()
    config.server.host = "127.0.0.1"
    config.server.port = 0
    config.pool.workers = 2
    app = asyncio.run_coroutine_threadsafe(create_server(config), loop).result(120)

    def stop():
        asyncio.run_coroutine_threadsafe(app.stop(2.0), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)

    return f"127.0.0.1:{app.port}", stop


def _stage(name, fn, out):
    import torch

    from leanrpc.formalize.gpumon import GpuMonitor

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    mon = GpuMonitor().start()
    t = time.perf_counter()
    extra = fn() or {}
    wall = time.perf_counter() - t
    out[name] = {"wall_s": round(wall, 2), **extra, "gpu": mon.stop()}
    tokens = extra.get("tokens")
    if tokens:
        out[name]["tokens_per_sec"] = round(tokens / wall, 1)
    print(name, json.dumps(out[name]), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--completion-tokens", type=int, default=64)
    p.add_argument("--problems", type=int, default=4)
    p.add_argument("--dora", action="store_true")
    p.add_argument("--out")
    p.add_argument(
        "--smoke", action="store_true", help="CPU, tiny widths: checks the script, measures nothing"
    )
    args = p.parse_args(argv)

    import dataclasses

    import torch

    from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config
    from leanrpc.formalize.tokenizer import build_qwen_tokenizer
    from leanrpc.formalize.train.data import load_pairs
    from leanrpc.formalize.train.grpo import GRPOSettings, build_grpo_trainer
    from leanrpc.formalize.train.peft_spec import PUBLISHED_DORA, PUBLISHED_LORA, with_adapter
    from leanrpc.formalize.train.recipe import RunSettings
    from leanrpc.formalize.train.sft import SFTSettings, build_sft_trainer

    overrides: dict = {"num_hidden_layers": args.layers}
    if args.smoke:
        dev = torch.device("cpu")
        overrides.update(
            hidden_size=128,
            intermediate_size=256,
            moe_intermediate_size=64,
            num_experts=8,
            num_experts_per_tok=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
        )
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_train.py needs CUDA (or --smoke)")
    else:
        dev = torch.device("cuda:0")
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu (smoke)"
    out: dict = {"device": name, "args": vars(args)}
    spec = PUBLISHED_DORA if args.dora else PUBLISHED_LORA
    t = time.perf_counter()
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    base, n_quantized = build_random_nf4(
        qwen3_coder_30b_a3b_config(**overrides), device=dev, compute_dtype=dtype
    )
    tokenizer = build_qwen_tokenizer()
    model = with_adapter(base, spec, gradient_checkpointing=True)
    out["build"] = {
        "s": round(time.perf_counter() - t, 1),
        "allocated_bytes": int(torch.cuda.memory_allocated()) if dev.type == "cuda" else None,
        "nf4_linears": n_quantized,
        "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }
    from formalize_eval import DATASETS

    minif2f = next(
        d / "minif2f-proofnet-putnam-goedel-prover"
        for d in (DATASETS, ROOT / "shared" / "datasets", ROOT.parent / "shared" / "datasets")
        if (d / "minif2f-proofnet-putnam-goedel-prover").is_dir()
    )
    pairs = load_pairs([str(minif2f / "minif2f.jsonl")], limit=64).pairs
    tmp = pathlib.Path("/tmp/gpu_train")
    run = RunSettings(
        model_dir="(in memory)",
        output_dir=str(tmp),
        adapter=spec,
        micro_batch=args.micro_batch,
        grad_accum=1,
        max_steps=args.steps,
        learning_rate=1e-4,
        device=dev.type,
        save_adapter=False,
    )

    def sft():
        trainer = build_sft_trainer(
            SFTSettings(run, max_length=1024), pairs, model=model, tokenizer=tokenizer
        )
        trainer.train()
        logs = [h for h in trainer.state.log_history if "num_tokens" in h]
        return {
            "tokens": int(logs[-1]["num_tokens"]),
            "loss": [h["loss"] for h in logs if "loss" in h],
        }

    _stage("sft", sft, out)

    address, stop = _server_in_thread()

    def grpo():
        settings = GRPOSettings(
            dataclasses.replace(run, micro_batch=args.group),
            server=address,
            num_generations=args.group,
            max_completion_length=args.completion_tokens,
        )
        trainer = build_grpo_trainer(settings, pairs, model=model, tokenizer=tokenizer)
        trainer.train()
        logs = [h for h in trainer.state.log_history if "num_tokens" in h]
        return {
            "tokens": int(logs[-1]["num_tokens"]),
            "reward": [h.get("reward") for h in logs],
            "completion_mean_length": [h.get("completions/mean_length") for h in logs],
        }

    try:
        _stage("grpo", grpo, out)
    finally:
        stop()

    def evaluate():
        return asyncio.run(_evaluate(model, tokenizer, dev, args.problems))

    _stage("eval", evaluate, out)
    text = json.dumps(out, indent=1, default=str)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    return 0


async def _evaluate(model, tokenizer, dev, n: int) -> dict:
    from formalize_eval import load_problems

    from leanrpc.config import Config
    from leanrpc.formalize.config import FormalizeConfig
    from leanrpc.formalize.engine import GenerationEngine
    from leanrpc.formalize.metrics import RunRecord, summarize
    from leanrpc.formalize.types import Candidate, FormalizeRequest, Outcome
    from leanrpc.pool.pool import Pool
    from leanrpc.services.formalize import FormalizeService
    from leanrpc.services.verify import VerifyOptions, VerifyService

    model.eval()
    problems = load_problems("minif2f", "test", n)
    vconfig = Config()
    vconfig.cache.enabled = False
    vconfig.pool.workers = 2
    pool = Pool(vconfig)
    await pool.start()
    verify_service = VerifyService(pool, vconfig)

    async def verify(code: str):
        return await verify_service.verify("gpu-train-eval", code, VerifyOptions())

    engine = GenerationEngine(model, tokenizer, device=dev, max_batch=8)
    config = FormalizeConfig(mathlib_names_path=None, triviality_check=False, max_new_tokens=128)
    service = FormalizeService(engine, verify, config)
    records = []

    async def one(problem):
        cands, outcome = [], None
        req = FormalizeRequest(
            id=problem["name"], informal_statement=problem["informal"], header=problem["header"]
        )
        async for ev in service.formalize(req):
            if isinstance(ev, Candidate):
                cands.append(ev)
            elif isinstance(ev, Outcome):
                outcome = ev
        records.append(RunRecord(problem["name"], 0, outcome, cands))

    t = time.perf_counter()
    await asyncio.gather(*(one(p) for p in problems))
    wall = time.perf_counter() - t
    await service.close()
    await pool.close()
    tokens = sum(r.outcome.generated_tokens for r in records)
    summary = summarize(
        records,
        {p["name"]: p["reference"] for p in problems},
        samples=1,
        generated_tokens=tokens,
        wall_s=wall,
    )
    return {"tokens": tokens, "metrics": summary}


if __name__ == "__main__":
    sys.exit(main())
