"""Random-init models built straight into NF4, for memory and speed checks without weights.

No real Qwen3-Coder-30B-A3B weights can be downloaded here or on the lent GPU,
but a random-init model with the real shapes gives true VRAM and decode-speed
figures (routing is random, the expert load spread is similar). Building it the
ordinary way would first allocate the 61 GB bf16 model; instead the module tree
is created on `meta` and every tensor is materialized on the target device one
module at a time, each `nn.Linear` directly as an NF4 `Linear4bit` (double
quantization), so peak memory stays near the quantized size.

`quantize_linears_nf4` is also usable on a loaded unquantized model.
"""

from __future__ import annotations

import torch
from torch import nn

from .modeling import Qwen3MoeUnfusedForCausalLM, mark_unfused


def qwen3_coder_30b_a3b_config(**overrides):
    """The architecture of Qwen3-Coder-30B-A3B-Instruct (its config.json, see docs/FORMALIZE.md)."""
    from transformers import Qwen3MoeConfig

    values = dict(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=5472,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        max_position_embeddings=262144,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        router_aux_loss_coef=0.0,
        bos_token_id=None,
        eos_token_id=151645,
        pad_token_id=151643,
    )
    values.update(overrides)
    return Qwen3MoeConfig(**values)


def _nf4_linear(in_features: int, out_features: int, weight: torch.Tensor, device, compute_dtype):
    import bitsandbytes as bnb

    layer = bnb.nn.Linear4bit(
        in_features,
        out_features,
        bias=False,
        compute_dtype=compute_dtype,
        compress_statistics=True,
        quant_type="nf4",
        device="meta",
    )
    layer.weight = bnb.nn.Params4bit(
        weight.to(device=device, dtype=compute_dtype),
        requires_grad=False,
        compress_statistics=True,
        quant_type="nf4",
        module=layer,
    ).to(device)
    return layer


@torch.no_grad()
def quantize_linears_nf4(
    model: nn.Module,
    *,
    device,
    compute_dtype=torch.bfloat16,
    skip=("lm_head",),
    init_std: float | None = None,
    seed: int = 0,
) -> int:
    """Replaces every nn.Linear (but `skip`) by an NF4 Linear4bit on `device`; returns the count.

    A weight on `meta` gets random values N(0, init_std) generated on `device`.
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    n = 0
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            full = f"{parent_name}.{child_name}" if parent_name else child_name
            if type(child) is not nn.Linear or full in skip or child_name in skip:
                continue
            if child.bias is not None:
                raise ValueError(f"{full} has a bias; not supported")
            w = child.weight
            if w.is_meta:
                w = torch.empty(w.shape, device=device, dtype=compute_dtype).normal_(
                    0, init_std or 0.02, generator=gen
                )
            setattr(
                parent,
                child_name,
                _nf4_linear(child.in_features, child.out_features, w, device, compute_dtype),
            )
            n += 1
    return n


@torch.no_grad()
def materialize_rest(
    model: nn.Module, *, device, dtype=torch.bfloat16, init_std: float = 0.02, seed: int = 1
) -> None:
    """Gives every remaining `meta` parameter a value on `device` (norms 1, others N(0, std)) and rebuilds rotary buffers."""
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeRotaryEmbedding

    gen = torch.Generator(device=device).manual_seed(seed)
    for module in model.modules():
        for name, p in list(module.named_parameters(recurse=False)):
            if not p.is_meta:
                continue
            t = torch.empty(p.shape, device=device, dtype=dtype)
            if "norm" in type(module).__name__.lower():
                t.fill_(1.0)
            else:
                t.normal_(0, init_std, generator=gen)
            setattr(module, name, nn.Parameter(t, requires_grad=False))
    for parent in model.modules():
        for child_name, child in list(parent.named_children()):
            if isinstance(child, Qwen3MoeRotaryEmbedding):
                with torch.device(device):
                    setattr(parent, child_name, Qwen3MoeRotaryEmbedding(child.config))
    leftovers = [n for n, b in model.named_buffers() if b.is_meta]
    if leftovers:
        raise RuntimeError(f"buffers still on meta: {leftovers[:5]}")


def build_random_nf4(config, *, device, compute_dtype=torch.bfloat16, seed: int = 0):
    """A random-init unfused Qwen3-MoE with every Linear but lm_head in NF4, built without the bf16 model."""
    with torch.device("meta"):
        model = Qwen3MoeUnfusedForCausalLM(config)
    n = quantize_linears_nf4(model, device=device, compute_dtype=compute_dtype, seed=seed)
    materialize_rest(model, device=device, dtype=compute_dtype, seed=seed + 1)
    mark_unfused(model)
    model.config.dtype = compute_dtype
    model.eval()
    return model, n
