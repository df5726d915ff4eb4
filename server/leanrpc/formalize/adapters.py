"""Adapters per request: naming adapter directories, and per-row adapter selection in one forward.

Owns `adapter_names_for(dirs)`, `select_adapters(model, rows)` and `UnknownAdapter`.
Imports torch (lazily), PEFT's LoraLayer (lazily) and modeling.py.

Several adapters are loaded on the same quantized base (loading.py). A forward
over a batch gives each row its own adapter (or none):

* the banked expert blocks get a tensor of per-row adapter indices (grouped.py
  picks the row's A/B/magnitude stacks in the grouped pass);
* every other LoRA layer (attention) computes its base output and a forward
  hook adds each row's adapter (PEFT's own mixed-batch `adapter_names` refuses DoRA).
"""

from __future__ import annotations

import contextlib
import pathlib
from typing import Iterator, Sequence

BASE = "__base__"  # PEFT's name for "no adapter" in a mixed batch


class UnknownAdapter(ValueError):
    """A request named an adapter that is not loaded."""


def adapter_names_for(adapter_dirs: Sequence[str]) -> list[tuple[str, str]]:
    """(name, dir) for each configured adapter: "name=path" names it, else the directory's basename.

    Raises ValueError on an empty or duplicate name.
    """
    named: list[tuple[str, str]] = []
    for entry in adapter_dirs:
        name, sep, path = entry.partition("=")
        if not sep:
            path, name = entry, pathlib.Path(entry.rstrip("/")).name
        name = name.strip()
        if not name or name == BASE:
            raise ValueError(f"adapter {entry!r}: the name must be non-empty and not {BASE!r}")
        if any(name == n for n, _ in named):
            raise ValueError(
                f"adapter name {name!r} is used twice; write name=path to tell them apart"
            )
        named.append((name, path))
    return named


def _expert_blocks(model):
    from .modeling import Qwen3MoeUnfusedExperts

    return [m for m in model.modules() if isinstance(m, Qwen3MoeUnfusedExperts)]


def _dora_scale(module, name: str):
    """DoRA's magnitude / ||W + s·BA|| per output feature of `module` (constant at inference; cached)."""
    import torch

    cache = module.__dict__.setdefault("_leanrpc_dora_scale", {})
    if name not in cache:
        from .grouped import base_layer, dequantized_weight

        a, b = (
            module.lora_A[name].weight.detach().float(),
            module.lora_B[name].weight.detach().float(),
        )
        merged = dequantized_weight(base_layer(module)) + float(module.scaling[name]) * (b @ a)
        magnitude = module.lora_magnitude_vector[name].weight.detach().float()
        cache[name] = magnitude / torch.linalg.norm(merged, dim=1)
    return cache[name]


def _row_lora_hook(index, known: list[str]):
    """A forward hook that adds each row's own adapter to a LoRA layer's base output."""
    import torch

    def hook(module, args, output):
        x = args[0]
        y = output
        rows_shape = (index.shape[0],) + (1,) * (y.dim() - 1)
        for i, name in enumerate(known):
            if name not in module.lora_A:
                continue
            a, b = module.lora_A[name], module.lora_B[name]
            lora = b(a(x.to(a.weight.dtype))).to(y.dtype) * module.scaling[name]
            adapted = y + lora
            if name in getattr(module, "lora_variant", {}):
                adapted = _dora_scale(module, name).to(y.dtype) * adapted
            y = torch.where((index == i).view(rows_shape), adapted, y)
        return y

    return hook


@contextlib.contextmanager
def select_adapters(model, rows: Sequence[str | None], known: Sequence[str] = ()) -> Iterator[None]:
    """Within the block, batch row i of `model`'s forward uses adapter rows[i] (None: none).

    `known` is the loaded adapters in bank order; a name outside it raises UnknownAdapter.
    Without any loaded adapter the block changes nothing. LoRA and DoRA both work
    (PEFT's own mixed-batch path refuses DoRA): outside the experts each LoRA layer
    computes its base output and a hook adds the row's adapter, m·(base + s·BA·x)
    with m = 1 for plain LoRA.
    """
    import torch
    from peft.tuners.lora import LoraLayer

    known = list(known)
    for name in rows:
        if name is not None and name not in known:
            raise UnknownAdapter(f"unknown adapter {name!r}; loaded: {', '.join(known) or 'none'}")
    if not known:
        yield
        return
    blocks = _expert_blocks(model)
    if any(block.bank is None for block in blocks):
        raise RuntimeError(
            "per-row adapter selection needs grouped dispatch (grouped.enable_grouped_dispatch)"
        )
    device = next(model.parameters()).device
    index = torch.tensor([len(known) if n is None else known.index(n) for n in rows], device=device)
    layers = [
        m for n, m in model.named_modules() if isinstance(m, LoraLayer) and ".mlp.experts." not in n
    ]
    saved = [m._disable_adapters for m in layers]
    handles = []
    try:
        for block in blocks:
            block.set_row_adapters(index)
        hook = _row_lora_hook(index, known)
        for m in layers:
            m._disable_adapters = True  # the layer computes its base output only
            handles.append(m.register_forward_hook(hook))
        yield
    finally:
        for h in handles:
            h.remove()
        for m, flag in zip(layers, saved):
            m._disable_adapters = flag
        for block in blocks:
            block.set_row_adapters(None)
