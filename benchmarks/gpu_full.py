"""gpu_check's checks at the real module count: dispatch timing and the full-size model.

  dispatch_bench  48 layers x 128 experts (top-8) at tiny widths, NF4: decode
                  ms/token with per-expert vs grouped dispatch (grouped.py) at
                  batch 1 and 8, in one run; logits agreement
  full_size_nf4   Qwen3-Coder-30B-A3B shapes, random init, built straight into NF4
                  (no bf16 copy): load time, weight VRAM, 512-token prefill,
                  decode tokens/s at batch 1 and 8, peak VRAM
  full_size_dora  DoRA (experts r=4, attention r=16) on the full-size model, one
                  forward+backward on 512 tokens, peak VRAM

Owns: these checks; the full-size model passes from full_size_nf4 to
full_size_dora in `Run.state["full"]`. When they run (time budget, CUDA
only) is gpu_check.py's call.
May import: benchmarks.gpu_run, leanrpc.formalize, torch, transformers, peft
and the standard library.
"""

from __future__ import annotations

import contextlib
import time

from benchmarks.gpu_run import ByteTokenizer, Run, check, decode_bench


@check("dispatch_bench")
def dispatch_bench(run: Run):
    from transformers import DynamicCache

    from leanrpc.formalize.grouped import enable_grouped_dispatch
    from leanrpc.formalize.modeling import Qwen3MoeUnfusedExperts
    from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config

    torch, dev, args = run.torch, run.dev, run.args
    t = time.perf_counter()
    cfg = qwen3_coder_30b_a3b_config(
        num_hidden_layers=args.bench_layers,
        num_experts=args.bench_experts,
        hidden_size=128,
        intermediate_size=256,
        moe_intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
    )
    model, n = build_random_nf4(cfg, device=dev)
    enable_grouped_dispatch(model)
    blocks = [m for m in model.modules() if isinstance(m, Qwen3MoeUnfusedExperts)]
    banks = [b.bank for b in blocks]
    res: dict = {
        "layers": args.bench_layers,
        "experts": args.bench_experts,
        "top_k": cfg.num_experts_per_tok,
        "hidden": 128,
        "moe_intermediate": 64,
        "linear4bit": n,
        "build_s": round(time.perf_counter() - t, 1),
        "steps": args.bench_steps,
    }

    def set_mode(grouped: bool):
        for block, bank in zip(blocks, banks):
            block.set_bank(bank if grouped else None)

    def step(tok, cache):
        out = model(input_ids=tok, cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1].argmax(-1, keepdim=True)

    def decode(batch: int, steps: int, seed: int):
        g = torch.Generator(device="cpu").manual_seed(seed)
        ids = torch.randint(0, 150000, (batch, 16), generator=g).to(dev)
        cache = DynamicCache(config=model.config)
        tokens = []
        with torch.no_grad():
            logits = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[
                :, -1
            ]
            first = logits.float()
            tok = logits.argmax(-1, keepdim=True)
            for _ in range(2):  # warm-up steps, untimed
                tok = step(tok, cache)
            run.sync()
            t0 = time.perf_counter()
            for _ in range(steps):
                tok = step(tok, cache)
                tokens.append(tok)
            run.sync()
        step_ms = (time.perf_counter() - t0) * 1000 / steps
        return step_ms, first, torch.cat(tokens, 1).cpu()

    for mode in (
        "per_expert",
        "grouped",
    ):  # touch every expert once (bitsandbytes repacks CPU weights
        set_mode(mode == "grouped")  # on a layer's first forward), untimed
        with torch.no_grad():
            model(input_ids=torch.randint(0, 150000, (1, 256)).to(dev), logits_to_keep=1)
    for batch in (1, 8):
        row = {}
        outs = {}
        for _ in range(2):  # A B A B, the faster of each: drift on a shared box hits both modes
            for mode in ("per_expert", "grouped"):
                set_mode(mode == "grouped")
                step_ms, first, toks = decode(batch, args.bench_steps, seed=batch)
                outs.setdefault(mode, (first, toks))
                best = min(step_ms, row.get(f"{mode}_ms_per_step", float("inf")))
                row[f"{mode}_ms_per_step"] = round(best, 2)
                row[f"{mode}_ms_per_token"] = round(best / batch, 2)
        a, b = outs["per_expert"][0], outs["grouped"][0]
        row["speedup"] = round(row["per_expert_ms_per_step"] / row["grouped_ms_per_step"], 2)
        row["prefill_logits_cosine"] = round(
            torch.nn.functional.cosine_similarity(
                a.double().flatten(), b.double().flatten(), dim=0
            ).item(),
            5,
        )
        row["greedy_tokens_agree"] = round(
            (outs["per_expert"][1] == outs["grouped"][1]).float().mean().item(), 3
        )
        res[f"batch{batch}"] = row
        run.write()
    set_mode(True)
    res["goal_grouped_3x_at_batch8"] = (
        res["batch8"]["speedup"] >= 3.0
    )  # reported; timing is not a pass/fail
    res["ok"] = all(res[f"batch{b}"]["prefill_logits_cosine"] > 0.99 for b in (1, 8))
    return res


@check("full_size_nf4")
def full_size_nf4(run: Run):
    from leanrpc.formalize.engine import GenerationEngine
    from leanrpc.formalize.grouped import enable_grouped_dispatch
    from leanrpc.formalize.skeleton import build_random_nf4, qwen3_coder_30b_a3b_config

    torch, dev, args = run.torch, run.dev, run.args
    expected = args.full_layers * (4 + 3 * args.full_experts)
    run.reset_peak()
    t = time.perf_counter()
    fcfg = qwen3_coder_30b_a3b_config(
        num_hidden_layers=args.full_layers, num_experts=args.full_experts
    )
    model, n = build_random_nf4(fcfg, device=dev)
    enable_grouped_dispatch(model)
    run.sync()
    res = {
        "build_s": round(time.perf_counter() - t, 1),
        "linear4bit": n,
        "expected": expected,
        "layers": args.full_layers,
        "experts": args.full_experts,
        "weights_allocated_gib": run.alloc_gib(),
        "build_peak_gib": run.peak_gib(),
        "footprint_gib": round(model.get_memory_footprint() / 2**30, 3),
    }
    run.state["full"] = model
    run.reset_peak()
    ids = torch.randint(0, 150000, (1, 512), device=dev)
    with torch.no_grad():
        model(ids, logits_to_keep=1)  # warm-up
        run.sync()
        t = time.perf_counter()
        model(ids, logits_to_keep=1)
        run.sync()
    res["prefill_512_s"] = round(time.perf_counter() - t, 3)
    res["prefill_peak_gib"] = run.peak_gib()
    run.write()
    eng = GenerationEngine(
        model, run.state.get("tok") or ByteTokenizer(), max_batch=8, eos_token_ids=()
    )
    eng.eos_ids = set()
    try:
        res["batch1"] = decode_bench(run, eng, 512, 1, 32)
        res["batch1"].pop("token_ids")
        if run.elapsed() < args.budget_s * 0.8:
            res["batch8"] = decode_bench(run, eng, 512, 8, 24)
            res["batch8"].pop("token_ids")
        else:
            res["batch8"] = {"skipped": "time budget"}
    finally:
        eng.close()
    res["ok"] = n == expected
    return res


@check("full_size_dora")
def full_size_dora(run: Run):
    from peft import LoraConfig, get_peft_model

    from leanrpc.formalize.grouped import disable_grouped_dispatch
    from leanrpc.formalize.loading import expert_adapter_modules

    torch, dev, args = run.torch, run.dev, run.args
    model = run.state.pop("full")
    disable_grouped_dispatch(
        model
    )  # training runs the per-expert modules (grouped is inference-only)
    run.reset_peak()
    t = time.perf_counter()
    cfg = LoraConfig(
        r=16,
        lora_alpha=32,
        use_dora=True,
        target_modules=[
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ],
        rank_pattern={r".*\.experts\..*": 4},
        alpha_pattern={r".*\.experts\..*": 8},
    )
    pm = get_peft_model(model, cfg)
    inject_s = time.perf_counter() - t
    n_exp = len(expert_adapter_modules(pm))
    pm.train()
    ids = torch.randint(0, 150000, (1, 512), device=dev)
    t = time.perf_counter()
    with torch.autocast(dev.type, dtype=torch.bfloat16) if run.cuda else contextlib.nullcontext():
        loss = pm(input_ids=ids, labels=ids).loss
    loss.backward()
    run.sync()
    trainable = sum(p.numel() for p in pm.parameters() if p.requires_grad)
    return {
        "inject_s": round(inject_s, 1),
        "fwd_bwd_512_s": round(time.perf_counter() - t, 2),
        "expert_adapter_modules": n_exp,
        "trainable_params_m": round(trainable / 1e6, 1),
        "peak_gib": run.peak_gib(),
        "ok": n_exp == args.full_layers * args.full_experts * 3,
    }
