"""Qwen3-MoE with per-expert `nn.Linear` modules (the "unfused" layout).

transformers 5 stores each layer's experts as two fused 3-D parameters
(`gate_up_proj [E, 2I, H]`, `down_proj [E, H, I]`). bitsandbytes only swaps
`nn.Linear` for `Linear4bit`, and PEFT cannot put LoRA/DoRA on a quantized 3-D
parameter, so whole-model NF4 with expert adapters needs one `nn.Linear` per
expert projection:

    model.layers.{L}.mlp.experts.{e}.gate_proj   Linear(H -> I)
    model.layers.{L}.mlp.experts.{e}.up_proj     Linear(H -> I)
    model.layers.{L}.mlp.experts.{e}.down_proj   Linear(I -> H)

These are the hub checkpoint's key names (and transformers 4.x's module names).
Because `Qwen3MoeUnfusedForCausalLM` lives outside the `transformers` package,
transformers treats it as custom code and skips its fusing conversion, so the
per-expert tensors load one-to-one into these modules, and with a
`BitsAndBytesConfig` each one is quantized as it is read: the bf16 model is never
materialized. The router (`mlp.gate`, a bare parameter) stays unquantized.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.initialization import no_init_weights
from transformers.models.qwen3_moe.modeling_qwen3_moe import (
    Qwen3MoeForCausalLM,
    Qwen3MoeSparseMoeBlock,
)

# PEFT >= 0.18 rewrites LoRA targets to the fused parameter names for any model
# whose config.model_type has a transformers conversion entry (qwen3_moe does).
# On the unfused model that silently drops every expert adapter, so the loaded
# model carries a model_type with no entry.
UNFUSED_MODEL_TYPE = "qwen3_moe_unfused"

EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")


class Qwen3MoeExpert(nn.Module):
    """One SiLU-gated expert: down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden_size: int, intermediate_size: int, hidden_act: str) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = ACT2FN[hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen3MoeUnfusedExperts(nn.ModuleList):
    """Drop-in for `Qwen3MoeExperts`: same call signature, children named 0..E-1.

    With a bank (`grouped.enable_grouped_dispatch`) the layer's hit experts run
    together (grouped.py); without one, one expert at a time (the reference path).
    `row_adapters` (set by `adapters.select_adapters`) holds each batch row's
    adapter index for the grouped path.
    """

    def __init__(self, config) -> None:
        super().__init__(
            Qwen3MoeExpert(config.hidden_size, config.moe_intermediate_size, config.hidden_act)
            for _ in range(config.num_experts)
        )
        self.num_experts = config.num_experts
        object.__setattr__(self, "bank", None)
        object.__setattr__(self, "row_adapters", None)

    def set_bank(self, bank) -> None:
        object.__setattr__(self, "bank", bank)

    def set_row_adapters(self, rows: torch.Tensor | None) -> None:
        object.__setattr__(self, "row_adapters", rows)

    def forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        if self.bank is not None:
            rows = self.row_adapters
            if (
                rows is None
            ):  # no per-row selection: PEFT's active adapter, as the per-expert path does
                token_adapter = self.bank.active_adapter_index(
                    self[0].gate_proj, hidden_states.shape[0]
                )
            else:
                token_adapter = rows.repeat_interleave(hidden_states.shape[0] // rows.shape[0])
            return self.bank(hidden_states, top_k_index, top_k_weights, token_adapter)
        return self.per_expert_forward(hidden_states, top_k_index, top_k_weights)

    def per_expert_forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        # Same arithmetic as the stock eager path, one expert at a time.
        out = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = nn.functional.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist()
        for e in hit:
            k_pos, tok = torch.where(mask[e])
            y = self[e](hidden_states[tok]) * top_k_weights[tok, k_pos, None]
            out.index_add_(0, tok, y.to(out.dtype))
        return out


def unfuse_sparse_blocks(model: nn.Module, config) -> int:
    """Replaces every sparse block's fused experts with `Qwen3MoeUnfusedExperts`; returns the count.

    The new modules are freshly constructed (weights not copied): used at
    construction time, before loading. `copy_fused_experts` copies weights from
    a loaded fused model, for comparisons.
    """
    n = 0
    for module in model.modules():
        if isinstance(module, Qwen3MoeSparseMoeBlock) and not isinstance(
            module.experts, Qwen3MoeUnfusedExperts
        ):
            module.experts = Qwen3MoeUnfusedExperts(config)
            n += 1
    return n


class Qwen3MoeUnfusedForCausalLM(Qwen3MoeForCausalLM):
    """`Qwen3MoeForCausalLM` whose experts are per-expert `nn.Linear`s.

    Load it exactly like the stock class, from a hub-layout checkpoint
    (`mlp.experts.{e}.{gate,up,down}_proj.weight`), optionally with a
    `BitsAndBytesConfig`. After loading, `mark_unfused(model)` must run before
    any PEFT call (`leanrpc.formalize.loading` does it).
    """

    def __init__(self, config) -> None:
        # Build the stock tree without initializing it (the fused expert tensors
        # are allocated empty and dropped right away), swap in per-expert modules,
        # then initialize once. Under from_pretrained this all happens on `meta`.
        with no_init_weights():
            super().__init__(config)
        unfuse_sparse_blocks(self, config)
        self.post_init()


def mark_unfused(model: nn.Module) -> None:
    """Sets config.model_type to a value PEFT has no fused-target conversion for."""
    model.config.model_type = UNFUSED_MODEL_TYPE


@torch.no_grad()
def copy_fused_experts(fused: Qwen3MoeForCausalLM, unfused: Qwen3MoeUnfusedForCausalLM) -> None:
    """Copies a fused model's weights into an unfused one (unquantized models only).

    gate_up_proj[e] holds the gate rows first, then the up rows (the qwen2_moe
    loading recipe concatenates gate, up on dim 1).
    """
    src = fused.state_dict()
    dst = unfused.state_dict()
    inter = fused.config.moe_intermediate_size
    for name, tensor in dst.items():
        if ".mlp.experts." not in name:
            tensor.copy_(src[name])
            continue
        prefix, rest = name.split(".mlp.experts.")
        e, proj, _ = rest.split(".")
        e = int(e)
        if proj == "down_proj":
            tensor.copy_(src[f"{prefix}.mlp.experts.down_proj"][e])
        else:
            gate_up = src[f"{prefix}.mlp.experts.gate_up_proj"][e]
            tensor.copy_(gate_up[:inter] if proj == "gate_proj" else gate_up[inter:])
