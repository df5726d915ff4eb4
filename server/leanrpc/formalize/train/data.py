"""Training data: informal-formal pairs -> prompt/completion rows in the serving prompt format.

Job: read pairs from a JSONL file or a `datasets`-loadable path, normalise each
formal statement to the `theorem … := by sorry` shape the repair loop asks for,
and render the prompt exactly as Formalize renders its first round
(`prompts.build_messages(task_message(...))` + the ```lean prefill), so a trained
adapter sees at serving time what it saw in training.

Field names are resolved once, here, from the known datasets:
  informal: informal / informal_statement (Herald) / natural_language_statement
            (Lean-Workbook) / informal_stmt (ProofNet-Verified) / informal_prefix (miniF2F)
  formal:   formal / formal_statement / formal_stmt
  header:   header (default "import Mathlib")
A row without both is skipped and counted; a formal statement that does not pass
the well-formedness check after normalisation is skipped and counted too.

`datasets` is the loader because it reads JSONL, Parquet, Arrow and hub-layout
folders alike and hands TRL the Dataset type it expects. Imports: formalize.prompts,
formalize.wellformed; datasets lazily.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable

from ..prompts import ASSISTANT_PREFIX, build_messages, render_chat, task_message
from ..wellformed import check

INFORMAL_KEYS = (
    "informal",
    "informal_statement",
    "natural_language_statement",
    "informal_stmt",
    "informal_prefix",
)
FORMAL_KEYS = ("formal", "formal_statement", "formal_stmt")
DEFAULT_HEADER = "import Mathlib"
CLOSE = "\n```"

_PROOF_TAIL = re.compile(r":=\s*(?:by\b.*)?\Z", re.S)


@dataclasses.dataclass(frozen=True)
class Pair:
    informal: str
    formal: str  # `theorem … := by sorry`
    header: str
    name: str = ""


@dataclasses.dataclass
class LoadReport:
    pairs: list[Pair]
    skipped_missing: int = 0
    skipped_ill_formed: int = 0


def as_sorry(formal: str) -> str:
    """`theorem t … := by\\n` / `… :=` / `… := by simp` -> `theorem t … := by sorry`."""
    text = formal.strip()
    if text.startswith("lemma "):
        text = "theorem " + text[len("lemma ") :]
    m = _PROOF_TAIL.search(text)
    if m is None:
        # the proof may be longer: cut at the last top-level `:=`
        cut = text.rfind(":=")
        text = text[:cut] if cut > 0 else text
    else:
        text = text[: m.start()]
    return text.rstrip() + " := by sorry"


def _informal(row: dict[str, Any]) -> str:
    for key in INFORMAL_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            text = value.strip()
            if key == "informal_prefix":  # miniF2F keeps it as a doc comment
                text = text.removeprefix("/--").removesuffix("-/").strip()
            return text
    return ""


def _formal(row: dict[str, Any]) -> str:
    for key in FORMAL_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def pairs_from_rows(rows: Iterable[dict[str, Any]]) -> LoadReport:
    report = LoadReport(pairs=[])
    for row in rows:
        informal, formal = _informal(row), _formal(row)
        if not informal or not formal:
            report.skipped_missing += 1
            continue
        statement = as_sorry(formal)
        if not check(statement).ok:
            report.skipped_ill_formed += 1
            continue
        header = row.get("header")
        header = header.strip() if isinstance(header, str) and header.strip() else DEFAULT_HEADER
        report.pairs.append(Pair(informal, statement, header, str(row.get("name") or "")))
    return report


def read_rows(source: str, *, split: str = "train") -> Iterable[dict[str, Any]]:
    """Rows of a .jsonl/.json file, or of anything `datasets.load_dataset` reads locally."""
    import datasets

    if source.endswith((".jsonl", ".json")):
        ds = datasets.load_dataset("json", data_files=source, split="train")
    elif source.endswith(".parquet"):
        ds = datasets.load_dataset("parquet", data_files=source, split="train")
    else:
        ds = datasets.load_dataset(source, split=split)
    return iter(ds)


def load_pairs(sources: Iterable[str], *, limit: int | None = None) -> LoadReport:
    total = LoadReport(pairs=[])
    for source in sources:
        part = pairs_from_rows(read_rows(source))
        total.pairs.extend(part.pairs)
        total.skipped_missing += part.skipped_missing
        total.skipped_ill_formed += part.skipped_ill_formed
    if limit is not None:
        total.pairs = total.pairs[:limit]
    return total


def prompt_text(tokenizer, pair: Pair) -> str:
    """The first-round prompt Formalize renders, with the assistant's ```lean prefill."""
    messages = build_messages(task_message(pair.informal, pair.header))
    return render_chat(tokenizer, messages) + ASSISTANT_PREFIX


def sft_dataset(tokenizer, pairs: list[Pair]):
    """prompt/completion rows (TRL's prompt-completion format: loss on the completion only)."""
    import datasets

    return datasets.Dataset.from_list(
        [{"prompt": prompt_text(tokenizer, p), "completion": p.formal + CLOSE} for p in pairs]
    )


def grpo_dataset(tokenizer, pairs: list[Pair]):
    """prompt rows plus the columns the formalization reward reads (reference, header, informal)."""
    import datasets

    return datasets.Dataset.from_list(
        [
            {
                "prompt": prompt_text(tokenizer, p),
                "reference": p.formal,
                "header": p.header,
                "informal": p.informal,
            }
            for p in pairs
        ]
    )
