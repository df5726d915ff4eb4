"""`python -m leanrpc.formalize.train {sft,grpo}`: the training recipes from the command line.

    python -m leanrpc.formalize.train sft  --model-dir M --data herald.jsonl --out runs/sft [--dora] [--packing]
    python -m leanrpc.formalize.train grpo --model-dir M --data lean_workbook.jsonl --out runs/grpo \\
        --server localhost:50051 [--adapter runs/sft/adapter] [--group 8 --beta 0.04 --lr 5e-6]

`--data` is repeatable: JSONL/JSON/Parquet files or `datasets`-loadable local
folders (train.data). The adapter lands in `<out>/adapter`, ready for
`formalize.adapter_dirs`. `--adapter` starts GRPO from an SFT adapter (its weights
are loaded into the fresh adapter of the same shape). Settings print as JSON first.
Imports: formalize.train rooms.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from .data import load_pairs
from .grpo import GRPOSettings, run_grpo
from .peft_spec import AdapterSpec
from .recipe import RunSettings
from .sft import SFTSettings, run_sft


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m leanrpc.formalize.train", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("stage", choices=("sft", "grpo"))
    p.add_argument("--model-dir", required=True)
    p.add_argument("--data", action="append", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--limit", type=int)
    p.add_argument("--dora", action="store_true")
    p.add_argument("--attention-r", type=int, default=64)
    p.add_argument("--expert-r", type=int, default=8)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--grad-accum", type=int, default=8)
    p.add_argument("--lr", type=float)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--no-gradient-checkpointing", action="store_true")
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=0)
    # SFT
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--packing", action="store_true")
    # GRPO
    p.add_argument("--server", default="localhost:50051")
    p.add_argument("--token")
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--completion-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--adapter", help="GRPO: start from this SFT adapter directory")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from ..loading import ModelLoadError

    try:
        return _main(parse(argv))
    except (ModelLoadError, FileNotFoundError, ValueError) as exc:
        print(f"leanrpc train: {exc}", file=sys.stderr)
        return 2


def _main(a: argparse.Namespace) -> int:
    spec = AdapterSpec(
        attention_r=a.attention_r,
        attention_alpha=2 * a.attention_r,
        expert_r=a.expert_r,
        expert_alpha=2 * a.expert_r,
        use_dora=a.dora,
    )
    run = RunSettings(
        model_dir=a.model_dir,
        output_dir=a.out,
        adapter=spec,
        micro_batch=a.micro_batch,
        grad_accum=a.grad_accum,
        learning_rate=a.lr if a.lr is not None else (1e-4 if a.stage == "sft" else 5e-6),
        max_steps=a.max_steps,
        epochs=a.epochs,
        gradient_checkpointing=not a.no_gradient_checkpointing,
        device=a.device,
        seed=a.seed,
    )
    report = load_pairs(a.data, limit=a.limit)
    print(
        json.dumps(
            {
                "stage": a.stage,
                "run": dataclasses.asdict(run),
                "pairs": len(report.pairs),
                "skipped_missing": report.skipped_missing,
                "skipped_ill_formed": report.skipped_ill_formed,
            },
            default=str,
        ),
        flush=True,
    )
    if not report.pairs:
        print("no usable informal-formal pairs in --data", file=sys.stderr)
        return 2
    if a.stage == "sft":
        trainer = run_sft(
            SFTSettings(run, max_length=a.max_length, packing=a.packing), report.pairs
        )
    else:
        settings = GRPOSettings(
            run,
            server=a.server,
            token=a.token,
            num_generations=a.group,
            beta=a.beta,
            max_completion_length=a.completion_tokens,
            temperature=a.temperature,
        )
        model = None
        if a.adapter:
            from peft import set_peft_model_state_dict
            from peft.utils import load_peft_weights

            from .peft_spec import trainable_model

            model, _ = trainable_model(
                run.model_dir,
                spec,
                device=run.device,
                compute_dtype=run.compute_dtype,
                gradient_checkpointing=run.gradient_checkpointing,
            )
            set_peft_model_state_dict(model, load_peft_weights(a.adapter))
        trainer = run_grpo(settings, report.pairs, model=model)
    print(
        json.dumps(
            {"adapter": str(run.adapter_dir()), "log": trainer.state.log_history[-1]}, default=str
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
