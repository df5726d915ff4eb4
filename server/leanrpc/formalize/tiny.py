"""A tiny random-init Qwen3-MoE checkpoint in hub layout, for tests and benchmarks.

Same architecture as Qwen3-Coder-30B-A3B (every layer sparse, top-k routing with
renormalized weights, per-head q/k RMSNorm, GQA, untied lm_head), the real Qwen3
tokenizer, tiny widths. It is written by the *stock* fused class, whose
`save_pretrained` emits per-expert keys (`mlp.experts.{e}.gate_proj.weight`), so
the directory looks like the hub checkpoint and is loaded through the same path
as the real model. Every Linear input width is a multiple of 64, which
bitsandbytes' CPU NF4 kernels need.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import asdict, dataclass

from .tokenizer import QWEN3_VOCAB_SIZE


@dataclass(frozen=True)
class TinySpec:
    hidden_size: int = 128
    moe_intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    num_experts: int = 8
    num_experts_per_tok: int = 2
    vocab_size: int = QWEN3_VOCAB_SIZE
    seed: int = 0
    # bf16 halves the checkpoint (the two 151936 x H matrices dominate); fp32 keeps
    # the fused/unfused comparison exact.
    dtype: str = "float32"


def tiny_config(spec: TinySpec = TinySpec()):
    from transformers import Qwen3MoeConfig

    for name in ("hidden_size", "moe_intermediate_size"):
        if getattr(spec, name) % 64:
            raise ValueError(f"{name} must be a multiple of 64 (bitsandbytes CPU kernels)")
    if (spec.num_attention_heads * spec.head_dim) % 64:
        raise ValueError("num_attention_heads * head_dim must be a multiple of 64")
    return Qwen3MoeConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=2 * spec.hidden_size,
        moe_intermediate_size=spec.moe_intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        num_experts=spec.num_experts,
        num_experts_per_tok=spec.num_experts_per_tok,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7},
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=151645,
        pad_token_id=151643,
        router_aux_loss_coef=0.0,
    )


def build_tiny_checkpoint(
    directory: str | pathlib.Path, spec: TinySpec = TinySpec(), *, tokenizer: bool = True
):
    """Writes config.json, model.safetensors (hub layout), generation_config.json and the tokenizer.

    Returns the directory as a Path. Deterministic for a given spec (seeded).
    """
    import torch
    from transformers import GenerationConfig, Qwen3MoeForCausalLM

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(spec.seed)
    model = Qwen3MoeForCausalLM(tiny_config(spec)).to(getattr(torch, spec.dtype))
    # Random-init routers are near-uniform; a larger spread makes routing decisive,
    # so fused-vs-unfused comparisons exercise distinct experts per token.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0.0, 0.5)
    model.generation_config = GenerationConfig(
        eos_token_id=[151645, 151643], pad_token_id=151643, do_sample=False
    )
    model.save_pretrained(str(directory))
    if tokenizer:
        from .tokenizer import save_qwen_tokenizer

        save_qwen_tokenizer(directory)
    (directory / "leanrpc_tiny.json").write_text(json.dumps(asdict(spec), indent=1))
    return directory
