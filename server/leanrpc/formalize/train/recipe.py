"""Recipe settings shared by SFT and GRPO, and the TRL arguments they become.

Job: the run knobs (micro-batch, accumulation, learning rate, steps, gradient
checkpointing, precision, seed, where the adapter goes) in one frozen dataclass,
turned into the common `transformers.TrainingArguments` keywords once, here.
bf16 is used exactly when CUDA is (CPU trains in fp32: bf16 matmuls on CPU are
slower and the tiny test model gains nothing). No reporting integrations
(`report_to="none"`): the metrics go to the log and `trainer.state.log_history`.

Imports: nothing of leanrpc; torch lazily.
"""

from __future__ import annotations

import dataclasses
import pathlib

from .peft_spec import PUBLISHED_LORA, AdapterSpec


@dataclasses.dataclass(frozen=True)
class RunSettings:
    model_dir: str
    output_dir: str
    adapter: AdapterSpec = PUBLISHED_LORA
    micro_batch: int = 1  # per_device_train_batch_size
    grad_accum: int = 8
    learning_rate: float = 1e-4
    max_steps: int = -1  # -1: epochs decide
    epochs: float = 1.0
    gradient_checkpointing: bool = True
    device: str = "auto"
    seed: int = 0
    logging_steps: int = 1
    save_adapter: bool = True

    @property
    def cuda(self) -> bool:
        import torch

        return self.device != "cpu" and torch.cuda.is_available()

    @property
    def compute_dtype(self) -> str:
        return "bfloat16" if self.cuda else "float32"

    def adapter_dir(self) -> pathlib.Path:
        """Where the trained adapter is saved: loadable as-is by `formalize.adapter_dirs`."""
        return pathlib.Path(self.output_dir) / "adapter"

    def trainer_kwargs(self) -> dict:
        return dict(
            output_dir=str(pathlib.Path(self.output_dir) / "trainer"),
            per_device_train_batch_size=self.micro_batch,
            gradient_accumulation_steps=self.grad_accum,
            learning_rate=self.learning_rate,
            max_steps=self.max_steps,
            num_train_epochs=self.epochs,
            gradient_checkpointing=self.gradient_checkpointing,
            # PEFT + checkpointing: reentrant checkpointing loses the adapter grads
            gradient_checkpointing_kwargs={"use_reentrant": False}
            if self.gradient_checkpointing
            else None,
            bf16=self.cuda,
            use_cpu=not self.cuda,
            seed=self.seed,
            logging_steps=self.logging_steps,
            save_strategy="no",
            report_to="none",
            remove_unused_columns=False,
            dataloader_num_workers=0,
        )
