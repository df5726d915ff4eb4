"""Checkpoint layouts on disk: detecting transformers 5's fused expert layout and converting it.

Owns `expert_layout(dir)` and `convert_fused_checkpoint(src, dst)`. Imports
safetensors and torch only (no model classes): it works tensor by tensor, so
converting never holds more than one tensor in memory beyond the shard being written.

    per-expert (hub) layout   model.layers.{L}.mlp.experts.{e}.{gate,up,down}_proj.weight
    fused layout              model.layers.{L}.mlp.experts.gate_up_proj   [E, 2I, H]
                              model.layers.{L}.mlp.experts.down_proj      [E, H, I]

In `gate_up_proj[e]` the gate rows come first, then the up rows (transformers'
qwen2_moe/qwen3_moe conversion concatenates gate, up on dim 1), so
gate = [:I], up = [I:]. A test checks the converted model's logits against the
stock fused class on the same fused file.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil

FUSED_KEY = re.compile(r"^(?P<prefix>.*\.mlp\.experts)\.(?P<proj>gate_up_proj|down_proj)$")
PER_EXPERT_KEY = re.compile(r"\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
INDEX_NAME = "model.safetensors.index.json"


def _shards(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.iterdir() if p.suffix == ".safetensors")


def checkpoint_keys(directory: str | pathlib.Path) -> list[str]:
    from safetensors import safe_open

    keys: list[str] = []
    for shard in _shards(pathlib.Path(directory)):
        with safe_open(str(shard), framework="pt") as f:
            keys.extend(f.keys())
    return keys


def expert_layout(directory: str | pathlib.Path) -> str:
    """ "per_expert", "fused", "mixed" (both kinds of expert keys) or "none" (no expert keys)."""
    keys = checkpoint_keys(directory)
    fused = any(FUSED_KEY.match(k) for k in keys)
    per_expert = any(PER_EXPERT_KEY.search(k) for k in keys)
    if fused and per_expert:
        return "mixed"
    return "fused" if fused else "per_expert" if per_expert else "none"


def _split(key: str, tensor) -> dict:
    m = FUSED_KEY.match(key)
    if m is None:
        return {key: tensor}
    prefix, proj = m["prefix"], m["proj"]
    out = {}
    if proj == "down_proj":
        for e in range(tensor.shape[0]):
            out[f"{prefix}.{e}.down_proj.weight"] = tensor[e].contiguous()
        return out
    if tensor.shape[1] % 2:
        raise ValueError(
            f"{key} has an odd fused dimension {tensor.shape[1]}; cannot split gate/up"
        )
    inter = tensor.shape[1] // 2
    for e in range(tensor.shape[0]):
        out[f"{prefix}.{e}.gate_proj.weight"] = tensor[e, :inter].contiguous()
        out[f"{prefix}.{e}.up_proj.weight"] = tensor[e, inter:].contiguous()
    return out


def convert_fused_checkpoint(src: str | pathlib.Path, dst: str | pathlib.Path) -> pathlib.Path:
    """Writes `src` (fused layout) to `dst` in the per-expert layout, shard by shard; returns dst.

    Every other file (config, tokenizer, generation config) is copied; a shard
    index is rewritten for the new key names.
    """
    from safetensors import safe_open
    from safetensors.torch import save_file

    src, dst = pathlib.Path(src), pathlib.Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_file() and item.suffix != ".safetensors" and item.name != INDEX_NAME:
            shutil.copy2(item, dst / item.name)
    weight_map: dict[str, str] = {}
    total = 0
    for shard in _shards(src):
        tensors = {}
        with safe_open(str(shard), framework="pt") as f:
            metadata = f.metadata() or {"format": "pt"}
            for key in f.keys():
                tensors.update(_split(key, f.get_tensor(key)))
        save_file(tensors, str(dst / shard.name), metadata=metadata)
        for key, t in tensors.items():
            weight_map[key] = shard.name
            total += t.numel() * t.element_size()
    if (src / INDEX_NAME).is_file():
        (dst / INDEX_NAME).write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1)
        )
    return dst
