"""The batch's KV cache and its padding mask, changed in place: a prefilled row joins
left-padded to a common length, finished rows leave and the columns that are padding in
every remaining row are trimmed from the left.

Owns: `join_row`, `keep_rows`. May import: torch. Used by formalize.engine (its thread
alone touches the cache).
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["join_row", "keep_rows"]


def join_row(cache, mask: torch.Tensor, new_cache, new_mask: torch.Tensor) -> torch.Tensor:
    """Appends `new_cache`'s row to `cache` (both left-padded to the longer); the new mask."""
    length = max(mask.shape[1], new_mask.shape[1])
    for mine, new in zip(cache.layers, new_cache.layers):
        mine.keys = torch.cat([_pad_left(mine.keys, length), _pad_left(new.keys, length)], 0)
        mine.values = torch.cat([_pad_left(mine.values, length), _pad_left(new.values, length)], 0)
    return torch.cat([_pad_left_2d(mask, length), _pad_left_2d(new_mask, length)], 0)


def keep_rows(cache, mask: torch.Tensor, keep: Sequence[int]) -> torch.Tensor:
    """Keeps only rows `keep` of `cache`, trimming all-padding leading columns; the new mask."""
    idx = torch.tensor(list(keep), device=mask.device)
    mask = mask[idx]
    first = int(mask.any(0).nonzero()[0])  # leading columns that are padding in every row
    for layer in cache.layers:
        layer.keys = layer.keys[idx, :, first:]
        layer.values = layer.values[idx, :, first:]
    return mask[:, first:]


def _pad_left(t: torch.Tensor, length: int) -> torch.Tensor:
    # KV tensors are [batch, heads, seq, head_dim]; padding goes on the seq axis.
    missing = length - t.shape[-2]
    if missing <= 0:
        return t
    pad = t.new_zeros((*t.shape[:-2], missing, t.shape[-1]))
    return torch.cat([pad, t], -2)


def _pad_left_2d(mask: torch.Tensor, length: int) -> torch.Tensor:
    missing = length - mask.shape[1]
    if missing <= 0:
        return mask
    return torch.cat([mask.new_zeros((mask.shape[0], missing)), mask], 1)
