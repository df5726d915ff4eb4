"""Stage 2: GRPO with TRL's GRPOTrainer, rewarded by leanrpc's composite gated reward.

Job: build the trainer whose reward is the formalization reward *served by
leanrpc* (well-formedness gate, compilation with `sorry` through Verify, the
triviality gate, then faithfulness to the reference), reached through the
client's TRL adapter `leanrpc.client.rewards.LeanReward(kind="formalization")`.
There is one implementation of that reward, on the server; this module only
points TRL at it and never scores anything itself.

Rows (data.grpo_dataset): `prompt` (Formalize's first-round prompt ending in the
```lean prefill) plus the columns the reward reads: `reference` (the gold
`theorem … := by sorry`), `header`, `informal`. TRL hands every non-prompt column
to the reward as a keyword. A completion is what the model writes after the
prefill, i.e. the statement and the closing fence, exactly as in serving.

Defaults and why:
  num_generations (group size) 8  the GRPO paper's group size range (4-16); 8
                                  matches the repair loop's max_candidates
  beta (KL coefficient) 0.04      the DeepSeekMath GRPO value; TRL's default is 0
                                  (no reference model), which lets a policy drift
                                  from well-formed Lean under a sparse reward
  learning_rate 1e-6              TRL's GRPO default scale for full models is 1e-6;
                                  adapters tolerate more (the CLI default is 5e-6)
  max_completion_length 256       a statement is 30-250 tokens (miniF2F/ProofNet)
  temperature 1.0                 GRPO needs diverse groups
A reward of None (leanrpc could not score: the server was unreachable) is
TRL's "no reward" (NaN, ignored in the group statistics), never 0.

Imports: formalize.train.{data,peft_spec,recipe}; leanrpc.client.rewards, TRL lazily.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from .data import Pair, grpo_dataset
from .peft_spec import model_and_tokenizer
from .recipe import RunSettings


@dataclasses.dataclass(frozen=True)
class GRPOSettings:
    run: RunSettings
    server: str = "localhost:50051"  # the leanrpc server that scores completions
    token: str | None = None
    num_generations: int = 8
    beta: float = 0.04
    max_completion_length: int = 256
    temperature: float = 1.0
    steps_per_generation: int | None = None
    loss_type: str = "dapo"  # TRL's default: token-level normalisation


def leanrpc_reward(settings: GRPOSettings) -> Callable[..., list[float | None]]:
    """The client's TRL adapter for the composite gated formalization reward."""
    from ...client.rewards import LeanReward

    kwargs: dict[str, Any] = {
        "server": settings.server,
        "kind": "formalization",
        "reference_column": "reference",
        "header_column": "header",
    }
    if settings.token:
        kwargs["token"] = settings.token
    return LeanReward(**kwargs)


def build_grpo_trainer(
    settings: GRPOSettings,
    pairs: list[Pair],
    *,
    model=None,
    tokenizer=None,
    reward_funcs: Sequence[Callable] | None = None,
):
    from trl import GRPOConfig, GRPOTrainer

    run = settings.run
    model, tokenizer = model_and_tokenizer(run, model, tokenizer)
    args = GRPOConfig(
        **run.trainer_kwargs(),
        num_generations=settings.num_generations,
        beta=settings.beta,
        max_completion_length=settings.max_completion_length,
        temperature=settings.temperature,
        steps_per_generation=settings.steps_per_generation,
        loss_type=settings.loss_type,
        log_completions=False,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=list(reward_funcs) if reward_funcs else [leanrpc_reward(settings)],
        args=args,
        train_dataset=grpo_dataset(tokenizer, pairs),
        processing_class=tokenizer,
    )


def run_grpo(settings: GRPOSettings, pairs: list[Pair], **kwargs):
    """Trains, saves the adapter (RunSettings.adapter_dir) and returns the trainer."""
    trainer = build_grpo_trainer(settings, pairs, **kwargs)
    trainer.train()
    if settings.run.save_adapter:
        trainer.model.save_pretrained(str(settings.run.adapter_dir()))
    return trainer
