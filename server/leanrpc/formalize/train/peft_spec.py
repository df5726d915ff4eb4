"""The adapter shapes of the design, and the trainable model they go on.

Job: one `AdapterSpec` per adapter recipe and the function that puts it on the
unfused NF4 model. Published ranks (the system this project follows):
attention `q/k/v/o_proj` r=64, alpha=128; every expert's `gate/up/down_proj`
r=8, alpha=16; LoRA or DoRA (`use_dora`). Expert ranks go through PEFT's
`rank_pattern`/`alpha_pattern` (regex on `…mlp.experts.{e}.*_proj`), so one
LoraConfig carries both. The router (`mlp.gate`, a bare parameter) and `lm_head`
get no adapter.

The base is loaded by `loading.load_base_model` (NF4 + double quantization,
`mark_unfused` first: without it PEFT rewrites the expert targets to fused
parameter names that do not exist here and silently drops them; see
docs/FORMALIZE.md "the PEFT trap"). `peft.prepare_model_for_kbit_training`
freezes the base and enables input grads for gradient checkpointing.

Imports: formalize.loading, formalize.modeling; torch and PEFT lazily.
"""

from __future__ import annotations

import dataclasses

from ..modeling import EXPERT_PROJECTIONS

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
EXPERT_PATTERN = r"experts\.\d+\.(?:" + "|".join(EXPERT_PROJECTIONS) + ")"


@dataclasses.dataclass(frozen=True)
class AdapterSpec:
    attention_r: int = 64
    attention_alpha: int = 128
    expert_r: int = 8
    expert_alpha: int = 16
    use_dora: bool = False
    dropout: float = 0.0

    def lora_config(self):
        from peft import LoraConfig

        return LoraConfig(
            r=self.attention_r,
            lora_alpha=self.attention_alpha,
            target_modules=list(ATTENTION_PROJECTIONS) + list(EXPERT_PROJECTIONS),
            rank_pattern={EXPERT_PATTERN: self.expert_r},
            alpha_pattern={EXPERT_PATTERN: self.expert_alpha},
            lora_dropout=self.dropout,
            use_dora=self.use_dora,
            bias="none",
            task_type="CAUSAL_LM",
        )


PUBLISHED_LORA = AdapterSpec()
PUBLISHED_DORA = AdapterSpec(use_dora=True)


def trainable_model(
    model_dir: str,
    spec: AdapterSpec,
    *,
    device: str = "auto",
    compute_dtype: str = "bfloat16",
    gradient_checkpointing: bool = True,
    quantize: bool = True,
):
    """(peft_model, device): the NF4 base frozen, the adapter trainable, grouped dispatch off."""
    from ..loading import load_base_model

    base, dev = load_base_model(
        model_dir, device=device, quantize=quantize, compute_dtype=compute_dtype
    )
    return with_adapter(
        base, spec, gradient_checkpointing=gradient_checkpointing, quantize=quantize
    ), dev


def model_and_tokenizer(run, model=None, tokenizer=None):
    """(model, tokenizer) of a recipe's `RunSettings` `run`: those given, else the
    tokenizer of `run.model_dir` and the NF4 base with `run.adapter` trainable."""
    from ..loading import load_tokenizer

    if tokenizer is None:
        tokenizer = load_tokenizer(run.model_dir)
    if model is None:
        model, _ = trainable_model(
            run.model_dir,
            run.adapter,
            device=run.device,
            compute_dtype=run.compute_dtype,
            gradient_checkpointing=run.gradient_checkpointing,
        )
    return model, tokenizer


def with_adapter(base, spec: AdapterSpec, *, gradient_checkpointing: bool, quantize: bool = True):
    """The unfused (mark_unfused) base frozen for k-bit training, with `spec`'s adapter named "default"."""
    from peft import get_peft_model, prepare_model_for_kbit_training

    from ..loading import ModelLoadError, expert_adapter_modules

    if quantize:
        base = prepare_model_for_kbit_training(
            base, use_gradient_checkpointing=gradient_checkpointing
        )
    elif gradient_checkpointing:
        base.gradient_checkpointing_enable()
    model = get_peft_model(base, spec.lora_config(), adapter_name="default")
    if not expert_adapter_modules(model, "default"):
        raise ModelLoadError("no expert projection got an adapter (is the model unfused?)")
    model.train()
    return model
