"""Test doubles for the Formalize stack: a scripted chat generator and fake verifiers."""

from __future__ import annotations

import asyncio
import re
from typing import Callable, Sequence

from leanrpc.formalize.generation import (
    FINISH_CANCELLED,
    FINISH_EOS,
    FINISH_ERROR,
    FINISH_STOP,
    GenerationResult,
    SamplingParams,
)
from leanrpc.results import Message, Position, Severity, SorryInfo, Status, VerifyResult

SMALL_NAMES = [
    ("Nat.Prime", "def", "Mathlib.Data.Nat.Prime.Defs"),
    ("Nat.Prime.two_le", "theorem", "Mathlib.Data.Nat.Prime.Defs"),
    ("Nat.prime_two", "theorem", "Mathlib.Data.Nat.Prime.Defs"),
    ("Nat.Prime.eq_two_or_odd", "theorem", "Mathlib.Data.Nat.Prime.Basic"),
    ("Real.sqrt", "def", "Mathlib.Analysis.SpecialFunctions.Pow.NNRpow"),
    ("Real.sqrt_nonneg", "theorem", "Mathlib.Analysis.SpecialFunctions.Sqrt"),
    ("Real.pi", "def", "Mathlib.Analysis.SpecialFunctions.Trigonometric.Basic"),
    ("Real.log", "def", "Mathlib.Analysis.SpecialFunctions.Log.Basic"),
    ("Finset.sum_range_succ", "theorem", "Mathlib.Algebra.BigOperators.Basic"),
    ("Finset.range", "def", "Mathlib.Data.Finset.Basic"),
    ("Subgroup.Normal", "structure", "Mathlib.Algebra.Group.Subgroup.Basic"),
    ("Nat.sqrt", "def", "Mathlib.Data.Nat.Sqrt"),
]

GOOD = "theorem two_add_two : (2 : ℕ) + 2 = 4 := by sorry"


class ScriptedStream:
    """A GenerationStream double: yields `text` in chunks, honours cancel()."""

    def __init__(
        self, text: str, params: SamplingParams, *, chunk: int, delay: float, fail: str = ""
    ) -> None:
        self.text = text
        self.params = params
        self.chunk = chunk
        self.delay = delay
        self.fail = fail
        self._cancel = False
        self._result: GenerationResult | None = None
        self.emitted_chunks = 0

    def cancel(self) -> None:
        self._cancel = True

    def __aiter__(self):
        return self._run()

    async def _run(self):
        if self._result is not None:
            return
        text = self.text
        reason = FINISH_EOS
        for stop in self.params.stop:
            if stop in text:
                text, reason = text[: text.index(stop)], FINISH_STOP
        out = ""
        for i in range(0, len(text), self.chunk):
            if self.delay:
                await asyncio.sleep(self.delay)
            else:
                await asyncio.sleep(0)
            if self._cancel:
                reason = FINISH_CANCELLED
                break
            piece = text[i : i + self.chunk]
            out += piece
            self.emitted_chunks += 1
            yield piece
        if self.fail:
            reason = FINISH_ERROR
        n = len(out) // self.chunk + 1
        self._result = GenerationResult(
            text=out,
            token_ids=list(range(n)),
            finish_reason=reason,
            prompt_tokens=10,
            generated_tokens=n,
            generation_s=0.001 * n,
            error=self.fail,
        )

    async def result(self) -> GenerationResult:
        async for _ in self:
            pass
        assert self._result is not None
        return self._result


class ScriptedGenerator:
    """ChatGenerator double. `outputs` is a list (one per call, last repeats) or a function of the messages."""

    def __init__(
        self,
        outputs: Sequence[str] | Callable[[list[dict]], str],
        *,
        chunk: int = 5,
        delay: float = 0.0,
        fail: str = "",
    ) -> None:
        self.outputs = outputs
        self.chunk = chunk
        self.delay = delay
        self.fail = fail
        self.calls: list[tuple[list[dict], str, SamplingParams]] = []
        self.streams: list[ScriptedStream] = []

    def submit_chat(self, messages, assistant_prefix, params):
        self.calls.append((list(messages), assistant_prefix, params))
        if callable(self.outputs):
            text = self.outputs(list(messages))
        else:
            text = self.outputs[min(len(self.calls) - 1, len(self.outputs) - 1)]
        stream = ScriptedStream(text, params, chunk=self.chunk, delay=self.delay, fail=self.fail)
        self.streams.append(stream)
        return stream


def sorry_result(code: str) -> VerifyResult:
    line = code.count("\n", 0, code.find("theorem")) + 1
    return VerifyResult(
        id="",
        status=Status.SORRY,
        messages=[
            Message(
                Severity.WARNING, Position(line, 8), Position(line, 11), "declaration uses 'sorry'"
            )
        ],
        sorries=[SorryInfo(Position(line, 40), Position(line, 45), "⊢ True")],
    )


def error_result(text: str, line: int = 3) -> VerifyResult:
    return VerifyResult(
        id="",
        status=Status.INVALID,
        messages=[Message(Severity.ERROR, Position(line, 20), Position(line, 30), text)],
    )


_UNKNOWN_NAME = re.compile(r"\b([A-Z]\w*\.(?:\w|')*(?:nonexistent|unknown_|prme)(?:\w|')*)")


class FakeVerify:
    """verify(code) double: unknown-looking dotted names are errors, everything else is SORRY."""

    def __init__(
        self,
        *,
        delay: float = 0.0,
        script: Sequence[VerifyResult] | None = None,
        raises: Exception | None = None,
    ) -> None:
        self.delay = delay
        self.script = list(script or [])
        self.raises = raises
        self.codes: list[str] = []

    async def __call__(self, code: str) -> VerifyResult:
        self.codes.append(code)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raises is not None:
            raise self.raises
        if self.script:
            return self.script.pop(0)
        m = _UNKNOWN_NAME.search(code)
        if m:
            return error_result(f"Unknown identifier `{m.group(1)}`")
        return sorry_result(code)


async def collect(aiter) -> list:
    return [x async for x in aiter]


_NUMERAL_EQ = re.compile(r"^\(?\s*(\d+)\s*(?::\s*ℕ\s*\))?\s*([+*]\s*\d+\s*)?=\s*(\d+)\s*$")


def _closed_numeral_fact(prop: str) -> bool | None:
    """True/False for `a = b` / `a + c = b` over numerals; None when the goal is not that simple."""
    m = _NUMERAL_EQ.match(prop.strip())
    if m is None:
        return True if prop.strip() == "True" else None
    lhs = int(m.group(1))
    if m.group(2):
        op, c = m.group(2)[0], int(m.group(2)[1:].strip())
        lhs = lhs + c if op == "+" else lhs * c
    return lhs == int(m.group(3))


class LeanLikeVerify(FakeVerify):
    """FakeVerify that answers the triviality probes as Lean would for simple goals.

    `theorem … := by first | trivial | decide | simp` is VALID only for a true closed
    numeral fact (or `True`); `example <hyps> : False := by simp_all` only when a
    hypothesis is a false closed numeral fact. Anything richer (a real competition
    statement) gets Lean's "unsolved goals"/"simp made no progress" error.
    """

    async def __call__(self, code: str) -> VerifyResult:
        from leanrpc.formalize.wellformed import signature_parts

        body = code.split("\n\n", 1)[-1].strip()
        if body.endswith("by first | trivial | decide | simp"):
            self.codes.append(code)
            parts = signature_parts(body.replace("by first | trivial | decide | simp", "by sorry"))
            if parts is not None and not parts[1] and _closed_numeral_fact(parts[2]):
                return VerifyResult(id="", status=Status.VALID)
            return error_result("unsolved goals", line=3)
        if body.startswith("example") and body.endswith("by simp_all"):
            self.codes.append(code)
            hyps = re.findall(r"\(\s*\w+\s*:\s*([^()]*(?:\([^()]*\)[^()]*)*)\)", body)
            if any(_closed_numeral_fact(h) is False for h in hyps):
                return VerifyResult(id="", status=Status.VALID)
            return error_result("simp_all made no progress", line=3)
        return await super().__call__(code)
