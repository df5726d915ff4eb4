"""Per-sample callers, one batch: gathers the calls that arrive together into one core call.

Owns `score_one(scorer, completion, problem)`: verl and verifiers call a reward once
per sample, from many threads or tasks at once. Calls that arrive within
`WINDOW_S` of the first one (up to `MAX_BATCH`) go to the server as one batch, so
a GRPO group is deduplicated and verified in one call, as TRL's batch call is.
One batcher per (process, event loop, scorer). May import: .core.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

WINDOW_S = 0.02
MAX_BATCH = 512

_batchers: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


class _Batcher:
    def __init__(self, scorer) -> None:
        self.scorer = scorer
        self.pending: list[tuple[Any, tuple, asyncio.Future]] = []
        self.flush_task: asyncio.Task | None = None

    def add(self, args: tuple) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.pending.append((args, future))
        if len(self.pending) >= MAX_BATCH:
            self._flush_now()
        elif self.flush_task is None:
            self.flush_task = asyncio.ensure_future(self._flush_later())
        return future

    async def _flush_later(self) -> None:
        await asyncio.sleep(WINDOW_S)
        self.flush_task = None
        self._flush_now()

    def _flush_now(self) -> None:
        if self.flush_task is not None:
            self.flush_task.cancel()
            self.flush_task = None
        batch, self.pending = self.pending, []
        if batch:
            asyncio.ensure_future(self._score(batch))

    async def _score(self, batch) -> None:
        columns = list(zip(*(args for args, _future in batch)))
        try:
            details = await self.scorer.score(*columns)
        except BaseException as exc:  # each caller gets the batch's error
            for _args, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_args, future), detail in zip(batch, details):
            if not future.done():
                future.set_result(detail)


async def score_one(scorer, *args):
    """The Detail of one sample, scored in a batch with the calls around it."""
    loop = asyncio.get_running_loop()
    per_scorer = _batchers.setdefault(scorer, {})
    key = (os.getpid(), id(loop))
    batcher = per_scorer.get(key)
    if batcher is None:
        batcher = per_scorer[key] = _Batcher(scorer)
    return await batcher.add(args)
