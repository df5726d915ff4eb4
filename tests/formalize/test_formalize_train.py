"""Training on CPU (issue 39, "Done when"): two SFT steps then two GRPO steps on the tiny
unfused NF4 model, once with LoRA and once with DoRA, at test ranks on the published
target modules (attention q/k/v/o, every expert's gate/up/down).

Asserts: labels are -100 on every prompt token (and only there); the adapter weights
change while the quantized base does not; the saved adapter loads through Formalize's
own adapter path; and the GRPO rewards are the composite gated reward answered by a
real leanrpc server on the stand-in, through the client's TRL adapter. The tiny model's
generations are noise, so the server's answer is 0.0 from its well-formedness gate:
the test checks that the reward TRL logged is the one the server's details carry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest
import torch
from transformers import TrainerCallback

from leanrpc.app import create_server
from leanrpc.formalize.loading import (
    attach_adapters,
    expert_adapter_modules,
    load_base_model,
    load_tokenizer,
)
from leanrpc.formalize.train.data import load_pairs, prompt_text
from leanrpc.formalize.train.grpo import GRPOSettings, build_grpo_trainer
from leanrpc.formalize.train.peft_spec import ATTENTION_PROJECTIONS, AdapterSpec, trainable_model
from leanrpc.formalize.train.recipe import RunSettings
from leanrpc.formalize.train.sft import SFTSettings, build_sft_trainer
from testkit import loopback_config, shared_path

pytestmark = pytest.mark.model

MINIF2F = shared_path("datasets", "minif2f-proofnet-putnam-goedel-prover", "minif2f.jsonl")


@pytest.fixture(scope="module")
def pairs():
    """The two shortest miniF2F pairs, header `import Mathlib` (CPU cost grows with the prompt)."""
    found = load_pairs([str(MINIF2F)]).pairs
    short = sorted(found, key=lambda p: len(p.informal) + len(p.formal))[:2]
    return [dataclasses.replace(p, header="import Mathlib") for p in short]


@pytest.fixture
async def server_address():
    app = await create_server(loopback_config(workers=1))
    try:
        yield f"127.0.0.1:{app.port}"
    finally:
        await app.stop(2.0)


class Rewards(TrainerCallback):
    """What TRL logged as each completion's reward, per step."""

    def __init__(self) -> None:
        self.trainer = None
        self.steps: list[list[float]] = []

    def on_step_end(self, args, state, control, **kwargs):
        logs = self.trainer._logs
        self.steps.append(list(logs["rewards"][self.trainer.reward_func_names[0]]))


def _quantized_state(model) -> dict[str, torch.Tensor]:
    """Every base tensor (the NF4 packed weights, their quant state, embeddings, norms, routers)."""
    out = {}
    for name, t in model.state_dict().items():
        if "lora_" not in name:
            out[name] = t.detach().clone()
    return out


def _adapter_state(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


# Two SFT and two GRPO steps over the 151,936-token vocabulary: about 2 minutes on a
# quiet 2-core machine, several times that when the cores are shared.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("use_dora", [False, True], ids=["lora", "dora"])
async def test_sft_then_grpo_on_the_tiny_nf4_model(
    use_dora, tiny_dir, pairs, server_address, tmp_path
):
    spec = AdapterSpec(
        attention_r=4, attention_alpha=8, expert_r=2, expert_alpha=4, use_dora=use_dora
    )
    run = RunSettings(
        model_dir=str(tiny_dir),
        output_dir=str(tmp_path),
        adapter=spec,
        micro_batch=1,
        grad_accum=1,
        max_steps=2,
        learning_rate=5e-3,
        device="cpu",
        gradient_checkpointing=False,
    )
    tokenizer = load_tokenizer(str(tiny_dir))
    model, _ = trainable_model(
        run.model_dir, spec, device="cpu", compute_dtype="float32", gradient_checkpointing=False
    )
    # the published target modules, with the test ranks
    experts = expert_adapter_modules(model, "default")
    assert len(experts) == 2 * 8 * 3  # layers x experts x gate/up/down
    lora_names = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if hasattr(m, "lora_A")}
    assert lora_names == set(ATTENTION_PROJECTIONS) | {"gate_proj", "up_proj", "down_proj"}
    attn = model.base_model.model.model.layers[0].self_attn.q_proj
    expert = model.base_model.model.model.layers[0].mlp.experts[0].up_proj
    assert attn.r["default"] == 4 and expert.r["default"] == 2
    assert attn.scaling["default"] == 2.0 and expert.scaling["default"] == 2.0
    assert bool(attn.lora_magnitude_vector) is use_dora
    assert type(attn.base_layer).__name__ == "Linear4bit"

    base_before = _quantized_state(model)
    adapter_before = _adapter_state(model)

    # ---- SFT: completion-only loss
    sft = build_sft_trainer(
        SFTSettings(run, max_length=1024), pairs, model=model, tokenizer=tokenizer
    )
    batch = next(iter(sft.get_train_dataloader()))
    prompts = {
        len(tokenizer(prompt_text(tokenizer, p), add_special_tokens=False)["input_ids"])
        for p in pairs
    }
    for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["attention_mask"]):
        real = int(mask.sum())
        n_prompt = next(n for n in prompts if torch.all(labels[:n] == -100) and labels[n] != -100)
        assert torch.all(labels[:n_prompt] == -100)  # every prompt token
        assert torch.equal(labels[n_prompt:real], ids[n_prompt:real])  # the completion is learned
    await asyncio.to_thread(sft.train)
    assert len([h for h in sft.state.log_history if "loss" in h]) == 2

    after_sft = _adapter_state(model)
    changed = [n for n in adapter_before if not torch.equal(adapter_before[n], after_sft[n])]
    assert any(".self_attn.q_proj.lora_B" in n for n in changed)
    assert any(".mlp.experts." in n and "lora_B" in n for n in changed)
    if use_dora:
        assert any("lora_magnitude_vector" in n for n in changed)

    # ---- GRPO: the reward is leanrpc's, through the client's TRL adapter
    grpo_run = dataclasses.replace(run, micro_batch=2, output_dir=str(tmp_path / "grpo"))
    settings = GRPOSettings(
        grpo_run, server=server_address, num_generations=2, max_completion_length=4, beta=0.0
    )
    grpo = build_grpo_trainer(settings, pairs, model=model, tokenizer=tokenizer)
    record = Rewards()
    record.trainer = grpo
    grpo.add_callback(record)
    reward = grpo.reward_funcs[0]
    assert type(reward).__name__ == "LeanReward" and reward.kind == "formalization"
    await asyncio.to_thread(grpo.train)
    assert len(record.steps) == 2 and all(len(s) == 2 for s in record.steps)
    details = reward.last_details
    assert len(details) == 2 and all(d.infra_error == "" for d in details)
    assert [d.reward for d in details] == record.steps[-1]  # what TRL logged is the server's
    assert all(not math.isnan(r) for s in record.steps for r in s)
    assert all(d.status.startswith("FAILED_") or d.status == "PASSED" for d in details)

    after_grpo = _adapter_state(model)
    base_after = _quantized_state(model)
    assert base_after.keys() == base_before.keys()
    for name, t in base_before.items():
        assert torch.equal(t, base_after[name]), f"the base changed: {name}"

    # ---- the adapter is saved where Formalize's per-request adapters load it
    model.save_pretrained(str(run.adapter_dir()))
    fresh, _ = load_base_model(str(tiny_dir), device="cpu", quantize=True, compute_dtype="float32")
    served, names = attach_adapters(fresh, [f"trained={run.adapter_dir()}"])
    assert names == ["trained"] and expert_adapter_modules(served, "trained")
    loaded = dict(served.named_parameters())
    for name, t in after_grpo.items():
        assert torch.equal(loaded[name.replace(".default", ".trained")], t), name
