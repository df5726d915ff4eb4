"""Decoding rules for one row of a batch: how a token is sampled from its logits, and
where a stop string ends the text.

Owns: `sample_rows` (greedy, repetition penalty, temperature, top-k, top-p, each row
with its own parameters and generator), `find_stop` and `stop_prefix_len` (stop strings
across token boundaries). May import: torch. Used by formalize.engine.
"""

from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["find_stop", "sample_rows", "stop_prefix_len"]


def sample_rows(logits: torch.Tensor, rows: Sequence) -> list[int]:
    """One token per row from its last logits, by the row's own `params` (greedy, repetition
    penalty over its last 512 `generated` tokens, temperature, top-k, top-p) and `generator`."""
    greedy = logits.argmax(-1).tolist()
    out = []
    for i, seq in enumerate(rows):
        p = seq.params
        if p.repetition_penalty == 1.0 and p.temperature <= 0:
            out.append(greedy[i])
            continue
        row = logits[i]
        if p.repetition_penalty != 1.0 and seq.generated:
            idx = torch.tensor(sorted(set(seq.generated[-512:])), device=row.device)
            vals = row[idx]
            row = row.clone()
            row[idx] = torch.where(
                vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty
            )
        if p.temperature <= 0:
            out.append(int(row.argmax()))
            continue
        row = row / p.temperature
        if p.top_k > 0 and p.top_k < row.shape[-1]:
            kth = torch.topk(row, p.top_k).values[-1]
            row = row.masked_fill(row < kth, float("-inf"))
        probs = torch.softmax(row, -1)
        if 0 < p.top_p < 1:
            sp, si = torch.sort(probs, descending=True)
            keep = (sp.cumsum(-1) - sp) < p.top_p  # always keeps the top token
            sp = sp * keep
            probs = torch.zeros_like(probs).scatter_(0, si, sp)
        out.append(int(torch.multinomial(probs, 1, generator=seq.generator)))
    return out


def find_stop(text: str, before: int, stops: Sequence[str]) -> int:
    """Where the first stop string in `text` starts, looking only where one could have been
    completed by the text added after `before` characters; -1 for none."""
    if not stops:
        return -1
    start = max(0, before - max(len(s) for s in stops))
    return min((i for i in (text.find(s, start) for s in stops) if i >= 0), default=-1)


def stop_prefix_len(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best
