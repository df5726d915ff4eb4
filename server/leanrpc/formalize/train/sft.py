"""Stage 1: supervised fine-tuning with TRL's SFTTrainer, loss on the completion only.

Job: build the trainer for informal -> formal pairs and run it. Rows are TRL's
prompt-completion format (data.sft_dataset): the prompt is Formalize's first-round
prompt with the ```lean prefill, the completion the `theorem … := by sorry`
statement and the closing fence (TRL appends EOS). `completion_only_loss=True`
makes TRL's collator label every prompt token -100, so the model learns to write
statements, not to reproduce the system prompt and the informal text.

Packing (`packing=True`, TRL's best-fit-decreasing packing, padding-free):
several examples share one row of `max_length` tokens, with position ids reset
per example so attention does not cross them. It removes padding, which pays for
short, uneven pairs (miniF2F statements are 50-300 tokens against a 400-token
prompt) and raises tokens per step; it needs a flash-attention-style kernel
for exact separation (on other attention implementations TRL warns that
examples may attend to each other), and each step's example count varies,
so per-step loss is noisier. Default off: masking with padding is exact
everywhere, and the model here runs on the eager/SDPA path.

Imports: formalize.train.{data,peft_spec,recipe}; TRL lazily.
"""

from __future__ import annotations

import dataclasses

from .data import Pair, sft_dataset
from .peft_spec import model_and_tokenizer
from .recipe import RunSettings


@dataclasses.dataclass(frozen=True)
class SFTSettings:
    run: RunSettings
    max_length: int = 2048
    packing: bool = False


def build_sft_trainer(settings: SFTSettings, pairs: list[Pair], *, model=None, tokenizer=None):
    """The TRL SFTTrainer over the NF4 model with the adapter (loaded unless `model` is given)."""
    from trl import SFTConfig, SFTTrainer

    run = settings.run
    model, tokenizer = model_and_tokenizer(run, model, tokenizer)
    args = SFTConfig(
        **run.trainer_kwargs(),
        max_length=settings.max_length,
        packing=settings.packing,
        completion_only_loss=True,
        dataset_num_proc=None,
    )
    return SFTTrainer(
        model=model,
        args=args,
        train_dataset=sft_dataset(tokenizer, pairs),
        processing_class=tokenizer,
    )


def run_sft(settings: SFTSettings, pairs: list[Pair], **kwargs):
    """Trains, saves the adapter (RunSettings.adapter_dir) and returns the trainer."""
    trainer = build_sft_trainer(settings, pairs, **kwargs)
    trainer.train()
    if settings.run.save_adapter:
        trainer.model.save_pretrained(str(settings.run.adapter_dir()))
    return trainer
