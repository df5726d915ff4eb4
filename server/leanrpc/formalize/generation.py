"""Torch-free generation types shared by the engine, the repair loop and test doubles.

A *chat generator* is anything with

    submit_chat(messages, assistant_prefix, params) -> stream

where the stream is async-iterable (text deltas), has a thread-safe `cancel()`,
and `await stream.result()` returns a `GenerationResult`. `GenerationEngine`
(engine.py) is the real one; tests use scripted ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any, AsyncIterator, Protocol, Sequence

FINISH_EOS = "eos"
FINISH_LENGTH = "length"
FINISH_STOP = "stop"
FINISH_CANCELLED = "cancelled"
FINISH_ERROR = "error"


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0  # >= 1 or <= 0: off
    top_k: int = 0  # 0: off
    repetition_penalty: float = 1.0
    max_new_tokens: int = 256
    seed: int | None = None
    # Generation stops when the text contains one of these; the text is cut before it.
    stop: tuple[str, ...] = ()
    # The loaded adapter this sequence runs with (None: the base model).
    adapter: str | None = None


@dataclasses.dataclass
class GenerationResult:
    text: str
    token_ids: list[int]
    finish_reason: str
    prompt_tokens: int
    generated_tokens: int
    queued_s: float = 0.0  # submit -> admitted
    ttft_s: float = 0.0  # submit -> first token
    generation_s: float = 0.0  # admitted -> finished
    error: str = ""


class GenerationStreamLike(Protocol):
    def cancel(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[str]: ...

    async def result(self) -> GenerationResult: ...


class ChatGenerator(Protocol):
    def submit_chat(
        self, messages: Sequence[dict[str, str]], assistant_prefix: str, params: SamplingParams
    ) -> GenerationStreamLike: ...


def describe(generator: Any) -> str:
    return getattr(generator, "description", type(generator).__name__)
