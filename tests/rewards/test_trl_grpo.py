"""TRL's real GRPOTrainer (trl 1.16) scores with LeanReward over a real leanrpc server
on the stand-in REPL (issue 38, "Done when", first point).

The model is the project's tiny random Qwen3-MoE (formalize/tiny.py): its own
generations are noise, so the rollouts come through TRL's `rollout_func` (its API
for custom generation) as known completions, tokenized by the model's tokenizer;
the training step, the reward call and TRL's logging are TRL's own. The stand-in
is a test double, not Lean: an unknown `Nat.nonexistent_*` lemma is its wrong proof.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from leanrpc.formalize.tiny import build_tiny_checkpoint
from leanrpc.rewards import AsyncLeanReward, LeanReward

HEADER = "import Mathlib\n"
STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
CASES = {  # completion -> the reward it must get
    "correct": ("```lean4\ntheorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega\n```", 1.0),
    "wrong": ("```lean\n  exact Nat.nonexistent_lemma a b\n```", 0.0),
    "changed statement": ("```lean\ntheorem add_comm' (a b : ℕ) : a = a := by\n  rfl\n```", 0.0),
    "axiom cheat": (
        "```lean\naxiom cheat : False\n\ntheorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
        "  exact cheat.elim\n```",
        0.0,
    ),
}
ORDER = list(CASES)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-grpo"))
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def rollout(tokenizer):
    """TRL's sampler repeats each prompt once per generation: the n-th copy gets case n."""

    def rollout_func(prompts, trainer):
        prompt_ids, completion_ids, logprobs = [], [], []
        for n, prompt in enumerate(prompts):
            ids = tokenizer(CASES[ORDER[n % len(ORDER)]][0], add_special_tokens=False)
            prompt_ids.append(tokenizer(prompt, add_special_tokens=False)["input_ids"])
            completion_ids.append(ids["input_ids"] + [tokenizer.eos_token_id])
            logprobs.append([0.0] * len(completion_ids[-1]))
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}

    return rollout_func


class Record(TrainerCallback):
    """The completions and per-completion rewards TRL logged at each step."""

    def __init__(self, on_first_step=None) -> None:
        self.trainer = None
        self.steps: list[list[tuple[str, float]]] = []
        self.on_first_step = on_first_step

    def on_step_end(self, args, state, control, **kwargs):
        logs = self.trainer._logs
        name = self.trainer.reward_func_names[0]
        self.steps.append(list(zip(logs["completion"], logs["rewards"][name])))
        if len(self.steps) == 1 and self.on_first_step is not None:
            self.on_first_step()


def make_trainer(tmp_path, tiny, reward, record):
    model, tokenizer = tiny
    data = Dataset.from_list(
        [
            {"prompt": f"Prove add_comm' ({k}).", "formal_statement": STATEMENT, "header": HEADER}
            for k in range(8)
        ]
    )
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_completion_length=96,
        learning_rate=1e-5,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        rollout_func=rollout(tokenizer),
        callbacks=[record],
    )
    record.trainer = trainer
    return trainer


async def test_grpo_logs_the_lean_rewards_and_none_once_the_server_stops(server, tmp_path, tiny):
    address = await server(workers=2)
    loop = asyncio.get_running_loop()

    def stop_server() -> None:  # between the two steps, from TRL's thread
        asyncio.run_coroutine_threadsafe(server.apps[0].stop(2.0), loop).result()

    record = Record(on_first_step=stop_server)
    reward = LeanReward(server=address, deadline_s=60)
    trainer = make_trainer(tmp_path, tiny, reward, record)
    await asyncio.to_thread(trainer.train)

    first, second = record.steps
    assert len(first) == 4
    for text, got in first:
        case = next(k for k, (completion, _) in CASES.items() if text == completion)
        assert got == CASES[case][1], (case, got)
    assert all(math.isnan(got) for _text, got in second)  # None: no reward, never 0
    assert reward.__name__ == "lean_proof" == trainer.reward_func_names[0]
    logged = [h for h in trainer.state.log_history if "rewards/lean_proof/mean" in h]
    assert logged[0]["rewards/lean_proof/mean"] == pytest.approx(0.25)
    assert reward.last_details[0].infra_error.startswith("UNAVAILABLE")


async def test_the_async_reward_is_awaited_by_trl(server, tmp_path, tiny):
    address = await server(workers=2)
    record = Record()
    reward = AsyncLeanReward(server=address)
    trainer = make_trainer(tmp_path, tiny, reward, record)
    await asyncio.to_thread(trainer.train)
    for step in record.steps:
        assert sorted(got for _t, got in step) == [0.0, 0.0, 0.0, 1.0]
    assert {d.status for d in reward.last_details} == {"VALID", "INVALID"}
