"""Batched generation engine: one thread steps every active sequence together.

    submit(prompt, params) ──> pending deque ──┐
      (any thread / event loop)                │  engine thread, one loop:
                                               ▼
        admit: prefill each new sequence alone (batch 1, its own KV cache),
               sample its first token, merge its cache into the batch cache
               (left-padded to a common length, a 2-D mask marks the padding)
        step:  one forward over all rows ([B, 1] tokens, per-row positions),
               per-row sampling, detokenize, stop checks
        drop:  finished / cancelled rows leave the batch (rows removed, all-pad
               columns trimmed from the left)
                                               │
    GenerationStream <── text deltas, final GenerationResult (call_soon_threadsafe)

A cancel sets a flag that the loop checks before and after every step, so a
cancelled sequence stops within one token (plus the step in flight). New
sequences join between steps: continuous batching without paged attention.
The per-row decoding rules are formalize.decoding's, the batch cache's row
operations formalize.kvbatch's.

The model is any transformers causal LM that takes `cache=` (transformers 5) and
`logits_to_keep`; a PeftModel is unwrapped to its (adapter-injected) base model.
Each sequence runs with its own adapter (SamplingParams.adapter): rows with
different adapters share a step (adapters.select_adapters).

Why one room: the batch (its rows, their shared KV cache and mask) has one owner,
the engine thread, and admit, step and drop are the three changes of that one
state, made in one loop; the parts without batch state are split out already
(decoding: per-row sampling and stops; kvbatch: cache row operations; streams:
the caller's side; generation: the request and result types).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import threading
import time
from typing import Iterable, Sequence

import torch

from . import kvbatch
from .adapters import UnknownAdapter, select_adapters
from .decoding import find_stop, sample_rows, stop_prefix_len
from .generation import (
    FINISH_CANCELLED,
    FINISH_EOS,
    FINISH_ERROR,
    FINISH_LENGTH,
    FINISH_STOP,
    GenerationResult,
    SamplingParams,
)
from .prompts import render_chat  # noqa: F401 (re-exported)
from .streams import EngineClosed, EngineStats, GenerationStream, PromptTooLong  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)


class _Seq:
    """Engine-thread state of one sequence."""

    __slots__ = (
        "stream",
        "prompt_ids",
        "params",
        "generated",
        "text",
        "emitted",
        "pos",
        "last",
        "generator",
        "submitted",
        "admitted",
        "first_token_at",
        "finish_reason",
        "prefix_offset",
        "read_offset",
        "error",
    )

    def __init__(
        self, stream: GenerationStream, prompt_ids: list[int], params: SamplingParams
    ) -> None:
        self.stream = stream
        self.prompt_ids = prompt_ids
        self.params = params
        self.generated: list[int] = []
        self.text = ""
        self.emitted = 0
        self.pos = 0  # position id of the next input token
        self.last = -1
        self.generator: torch.Generator | None = None
        self.submitted = time.perf_counter()
        self.admitted = 0.0
        self.first_token_at = 0.0
        self.finish_reason: str | None = None
        self.prefix_offset = 0
        self.read_offset = 0
        self.error = ""


class GenerationEngine:
    """Continuous-batching decoder around one model on one device.

    Args:
        model: a transformers causal LM (or PeftModel) already on `device`.
        tokenizer: its tokenizer (for prompts given as text and for detokenizing).
        max_batch: most sequences decoded together; the rest wait in order.
        max_prompt_tokens: longer prompts are refused at submit.
        eos_token_ids: extra stop ids; the tokenizer's and generation_config's are added.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        device=None,
        max_batch: int = 8,
        max_prompt_tokens: int = 8192,
        eos_token_ids: Iterable[int] = (),
        name: str = "formalize-engine",
        adapter_names: Sequence[str] = (),
    ) -> None:
        self.model = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.adapter_names = list(adapter_names)  # loaded adapters, in bank order (adapters.py)
        self.tokenizer = tokenizer
        self.device = (
            torch.device(device) if device is not None else next(self.model.parameters()).device
        )
        self.max_batch = max_batch
        self.max_prompt_tokens = max_prompt_tokens
        self.eos_ids = set(int(t) for t in eos_token_ids)
        gen_cfg = getattr(self.model, "generation_config", None)
        for src in (
            getattr(gen_cfg, "eos_token_id", None),
            getattr(tokenizer, "eos_token_id", None),
        ):
            if isinstance(src, int):
                self.eos_ids.add(src)
            elif src:
                self.eos_ids.update(int(t) for t in src)
        self.stats = EngineStats()
        # HF fast tokenizers can raise "Already borrowed" when one thread encodes
        # while another decodes (huggingface/tokenizers#537): serialize them.
        self._tok_lock = threading.Lock()
        self.description = f"{type(self.model).__name__} on {self.device}, max_batch {max_batch}"
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._pending: collections.deque[_Seq] = collections.deque()
        self._active: list[_Seq] = []
        self._closed = False
        self._cache = None
        self._mask: torch.Tensor | None = None  # [B, L] bool, True = real token
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ API
    def encode_chat(self, messages: Sequence[dict], assistant_prefix: str = "") -> list[int]:
        """Renders chat messages with the tokenizer's template (ChatML fallback) and tokenizes."""
        with self._tok_lock:
            text = render_chat(self.tokenizer, messages) + assistant_prefix
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def submit_chat(
        self,
        messages: Sequence[dict],
        assistant_prefix: str = "",
        params: SamplingParams = SamplingParams(),
    ) -> "GenerationStream":
        """`submit` for chat messages (the ChatGenerator protocol the repair loop uses)."""
        return self.submit(self.encode_chat(messages, assistant_prefix), params)

    def submit(
        self, prompt: str | Sequence[int], params: SamplingParams = SamplingParams()
    ) -> GenerationStream:
        """Queues a sequence. Call from inside an event loop to iterate deltas asynchronously."""
        if isinstance(prompt, str):
            with self._tok_lock:
                ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        else:
            ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("empty prompt")
        if len(ids) > self.max_prompt_tokens:
            raise PromptTooLong(
                f"prompt has {len(ids)} tokens; the limit is {self.max_prompt_tokens}"
            )
        if params.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if params.adapter is not None and params.adapter not in self.adapter_names:
            raise UnknownAdapter(
                f"unknown adapter {params.adapter!r}; loaded: {', '.join(self.adapter_names) or 'none'}"
            )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        stream = GenerationStream(next(self._ids), loop)
        seq = _Seq(stream, ids, params)
        with self._cond:
            if self._closed:
                raise EngineClosed("the generation engine is closed")
            self._pending.append(seq)
            self._cond.notify()
        return stream

    @property
    def active_count(self) -> int:
        return len(self._active)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def close(self, timeout: float = 30.0) -> None:
        """Stops the thread; unfinished sequences end with finish_reason 'cancelled'."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout)

    # ---------------------------------------------------------- engine thread
    def _run(self) -> None:
        torch.set_grad_enabled(False)
        while True:
            with self._cond:
                while not self._closed and not self._pending and not self._active:
                    self._cond.wait()
                if self._closed:
                    doomed = list(self._pending) + self._active
                    self._pending.clear()
                    self._active = []
                    break
                admit = []
                while self._pending and len(self._active) + len(admit) < self.max_batch:
                    admit.append(self._pending.popleft())
            try:
                with torch.inference_mode():
                    for seq in admit:
                        self._admit(seq)
                    self._drop_finished()
                    if self._active:
                        self._step()
                        self._drop_finished()
            except Exception as exc:  # OOM or a bug: fail the batch, keep serving
                log.exception("generation step failed")
                self._fail_all(exc, also=admit)
        for seq in doomed:
            seq.finish_reason = seq.finish_reason or FINISH_CANCELLED
            self._complete(seq)

    def _forward(self, input_ids, attention_mask, position_ids, cache, rows: Sequence[_Seq]):
        with select_adapters(self.model, [s.params.adapter for s in rows], self.adapter_names):
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        return out.logits[:, -1, :].float()

    def _admit(self, seq: _Seq) -> None:
        from transformers import DynamicCache

        if seq.stream.cancel_requested:
            seq.finish_reason = FINISH_CANCELLED
            self._complete(seq)
            return
        seq.admitted = time.perf_counter()
        p = seq.params
        if p.temperature > 0:
            seq.generator = torch.Generator(device=self.device)
            seq.generator.manual_seed(
                p.seed if p.seed else int.from_bytes(os.urandom(8), "little") >> 1
            )
        n = len(seq.prompt_ids)
        t0 = time.perf_counter()
        cache = DynamicCache(config=self.model.config)
        ids = torch.tensor([seq.prompt_ids], device=self.device)
        try:
            logits = self._forward(
                ids,
                torch.ones_like(ids, dtype=torch.bool),
                torch.arange(n, device=self.device)[None],
                cache,
                [seq],
            )
        except Exception as exc:
            log.exception("prefill failed")
            seq.finish_reason, seq.error = FINISH_ERROR, f"{type(exc).__name__}: {exc}"
            self._complete(seq)
            _free_cuda(self.device)
            return
        self.stats.prefills += 1
        self.stats.prefill_tokens += n
        self.stats.prefill_s += time.perf_counter() - t0
        seq.pos = n
        self._accept(seq, sample_rows(logits, [seq])[0])
        if seq.finish_reason is not None:
            self._complete(seq)
            return
        self._merge(seq, cache, n)

    def _merge(self, seq: _Seq, cache, n: int) -> None:
        mask = torch.ones((1, n), dtype=torch.bool, device=self.device)
        if self._cache is None:
            self._cache, self._mask, self._active = cache, mask, [seq]
            return
        self._mask = kvbatch.join_row(self._cache, self._mask, cache, mask)
        self._active.append(seq)

    def _step(self) -> None:
        rows = self._active
        b = len(rows)
        t0 = time.perf_counter()
        ids = torch.tensor([[s.last] for s in rows], device=self.device)
        pos = torch.tensor([[s.pos] for s in rows], device=self.device)
        mask = torch.cat([self._mask, torch.ones((b, 1), dtype=torch.bool, device=self.device)], 1)
        logits = self._forward(ids, mask, pos, self._cache, rows)
        self._mask = mask
        tokens = sample_rows(logits, rows)
        self.stats.steps += 1
        self.stats.batch_rows_total += b
        self.stats.max_batch_seen = max(self.stats.max_batch_seen, b)
        self.stats.decode_s += time.perf_counter() - t0
        for seq, tok in zip(rows, tokens):
            seq.pos += 1
            self._accept(seq, tok)

    def _accept(self, seq: _Seq, token: int) -> None:
        """Appends a sampled token, streams its text, and decides whether the sequence ends."""
        if not seq.first_token_at:
            seq.first_token_at = time.perf_counter()
        self.stats.generated_tokens += 1
        if seq.stream.cancel_requested:
            seq.finish_reason = FINISH_CANCELLED
            return
        if token in self.eos_ids:
            seq.finish_reason = FINISH_EOS
            return
        seq.generated.append(token)
        seq.last = token
        delta = self._detok(seq)
        if delta:
            before = len(seq.text)
            seq.text += delta
            cut = find_stop(seq.text, before, seq.params.stop)
            if cut >= 0:
                seq.text = seq.text[:cut]
                seq.finish_reason = FINISH_STOP
                return
            hold = stop_prefix_len(seq.text, seq.params.stop)
            if len(seq.text) - hold > seq.emitted:
                seq.stream._post(seq.text[seq.emitted : len(seq.text) - hold])
                seq.emitted = len(seq.text) - hold
        if len(seq.generated) >= seq.params.max_new_tokens:
            seq.finish_reason = FINISH_LENGTH

    def _detok(self, seq: _Seq) -> str:
        # Incremental detokenization: hold back text that ends in an incomplete
        # UTF-8 sequence (decoded as U+FFFD) until the next token completes it.
        ids = seq.generated
        with self._tok_lock:
            prefix = self.tokenizer.decode(
                ids[seq.prefix_offset : seq.read_offset], skip_special_tokens=True
            )
            new = self.tokenizer.decode(ids[seq.prefix_offset :], skip_special_tokens=True)
        if len(new) > len(prefix) and not new.endswith("\ufffd"):
            seq.prefix_offset, seq.read_offset = seq.read_offset, len(ids)
            return new[len(prefix) :]
        return ""

    def _drop_finished(self) -> None:
        keep = [
            i
            for i, s in enumerate(self._active)
            if s.finish_reason is None and not s.stream.cancel_requested
        ]
        if len(keep) == len(self._active):
            return
        for i, s in enumerate(self._active):
            if i not in keep:
                s.finish_reason = s.finish_reason or FINISH_CANCELLED
                self._complete(s)
        if not keep:
            self._cache, self._mask, self._active = None, None, []
            return
        self._active = [self._active[i] for i in keep]
        self._mask = kvbatch.keep_rows(self._cache, self._mask, keep)

    def _fail_all(self, exc: BaseException, also: Sequence[_Seq] = ()) -> None:
        # `also`: sequences being admitted when it failed (not yet in the batch).
        doomed = list(self._active) + [
            s for s in also if s not in self._active and not s.stream.done
        ]
        for seq in doomed:
            seq.finish_reason, seq.error = FINISH_ERROR, f"{type(exc).__name__}: {exc}"
            self._complete(seq)
        self._cache, self._mask, self._active = None, None, []
        _free_cuda(self.device)

    def _complete(self, seq: _Seq) -> None:
        # Flush what the incremental decoder or the stop-string hold-back kept back.
        if seq.finish_reason != FINISH_STOP and seq.generated:
            with self._tok_lock:
                full = self.tokenizer.decode(seq.generated, skip_special_tokens=True)
            if full.startswith(seq.text):
                seq.text = full
        if len(seq.text) > seq.emitted:
            seq.stream._post(seq.text[seq.emitted :])
            seq.emitted = len(seq.text)
        now = time.perf_counter()
        seq.stream._finish(
            GenerationResult(
                text=seq.text,
                token_ids=list(seq.generated),
                finish_reason=seq.finish_reason or FINISH_CANCELLED,
                prompt_tokens=len(seq.prompt_ids),
                generated_tokens=len(seq.generated),
                queued_s=(seq.admitted or now) - seq.submitted,
                ttft_s=(seq.first_token_at - seq.submitted) if seq.first_token_at else 0.0,
                generation_s=(now - seq.admitted) if seq.admitted else 0.0,
                error=seq.error,
            )
        )


def _free_cuda(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
