"""FormalizeConfig: everything the Formalize stack reads from the server's configuration."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

DEFAULT_HEADER = "import Mathlib"
MATHLIB_NAMES_ENV = "LEANRPC_MATHLIB_NAMES"
# In a source checkout the project's datasets sit next to it, in ../shared.
_CHECKOUT_NAMES = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "datasets"
    / "mathlib-decl-names"
    / "mathlib_decls.tsv"
)


def find_mathlib_names() -> str | None:
    """The Mathlib declaration-name list: $LEANRPC_MATHLIB_NAMES, else the
    dataset next to a source checkout, else None (retrieval off)."""
    explicit = os.environ.get(MATHLIB_NAMES_ENV)
    if explicit:
        return explicit
    return str(_CHECKOUT_NAMES) if _CHECKOUT_NAMES.is_file() else None


DEFAULT_MATHLIB_NAMES = find_mathlib_names()


@dataclasses.dataclass
class FormalizeConfig:
    """Formalize settings. The server fills it from TOML or flags.

    With `model_dir` unset the service still starts, reports NOT_SERVING with a
    reason, and answers Formalize with FAILED_PRECONDITION.
    """

    # Local hub-layout checkpoint of a Qwen3-MoE model (config.json + safetensors).
    model_dir: str | None = None
    # PEFT adapter directories (LoRA or DoRA), all loaded on the same base; each request
    # picks one by name ("name=path" names it, else the directory's basename).
    adapter_dirs: list[str] = dataclasses.field(default_factory=list)
    # The adapter of a request that names none: "auto" = the first configured one (none
    # if there are none), "none" = the base model, or an adapter name.
    default_adapter: str = "auto"
    # Where the tokenizer files are; default: model_dir.
    tokenizer_dir: str | None = None
    # "auto" (CUDA if available), "cpu", "cuda" or "cuda:N".
    device: str = "auto"
    # Whole-model NF4 with double quantization (bitsandbytes). Off: bf16 on CUDA, fp32 on CPU.
    quantize: bool = True
    # Compute dtype of the 4-bit layers.
    compute_dtype: str = "bfloat16"
    # A layer's hit experts computed together (grouped.py); off: one expert at a time.
    grouped_dispatch: bool = True
    # Where a fused-layout checkpoint (experts.gate_up_proj) is converted to the
    # per-expert layout before loading; None (TOML "") = a temporary directory, removed after loading.
    convert_dir: str | None = None

    # Generation engine: sequences decoded together in one forward pass.
    max_batch: int = 8
    max_new_tokens: int = 512
    max_prompt_tokens: int = 8192
    # Server-side sampling knobs (temperature, top_p and seed come from each request;
    # temperature 0 = greedy). Qwen's own defaults are top_k 20, repetition_penalty 1.05.
    top_k: int = 0
    repetition_penalty: float = 1.0

    # Repair loop.
    default_max_iterations: int = 5
    max_iterations_limit: int = 16
    default_header: str = DEFAULT_HEADER
    error_feedback_chars: int = 800

    # Retrieval. System A ("Did you mean" for unknown identifiers) is on whenever
    # the names file exists; System B (top-k declarations in the first prompt) is
    # per request (FormalizeRequest.retrieval) or forced with retrieval_default.
    mathlib_names_path: str | None = DEFAULT_MATHLIB_NAMES
    retrieval_top_k: int = 8
    retrieval_default: bool = False
    # System B's dense stage (dense.py): "wordllama" (weights ship in its wheel),
    # "sentence-transformers:<local path>", or "none" (BM25 alone). The top
    # retrieval_dense_n declarations by embedding are reranked by BM25 to top_k.
    # The embedded declarations are cached in retrieval_cache_dir (None = ~/.cache/leanrpc/retrieval).
    # Default "none": with WordLlama the dense stage found fewer of the gold statements'
    # Mathlib names than BM25 alone (benchmarks/RESULTS.md, "System B").
    retrieval_embedder: str = "none"
    retrieval_dense_n: int = 100
    retrieval_cache_dir: str | None = None
    did_you_mean_k: int = 5

    # Candidates sampled per repair round in one batch (request `candidates`, bounded).
    default_candidates: int = 1
    max_candidates: int = 8
    # Triviality gate: a compiled statement that `by trivial/simp/decide` closes, or whose
    # hypotheses `simp_all` refutes, is marked suspect_trivial (two more verify calls).
    triviality_check: bool = True

    # Jobs one Formalize stream may have in flight at once.
    max_jobs_per_stream: int = 64
    # Wall-clock budgets in seconds: per job (a request may ask for less; 0 = none)
    # and per stream (every job on the stream ends when it is spent; 0 = none).
    job_budget_s: float = 600.0
    stream_budget_s: float = 0.0

    def validate(self) -> None:
        """Raises ValueError for settings that can never work (a missing model_dir is not one)."""
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(
                f"formalize.device must be auto, cpu, cuda or cuda:N, not {self.device!r}"
            )
        if self.compute_dtype not in ("bfloat16", "float16", "float32"):
            raise ValueError(
                f"formalize.compute_dtype must be bfloat16, float16 or float32, not {self.compute_dtype!r}"
            )
        for name in (
            "max_batch",
            "max_new_tokens",
            "max_prompt_tokens",
            "default_max_iterations",
            "max_iterations_limit",
            "error_feedback_chars",
            "max_jobs_per_stream",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"formalize.{name} must be >= 1")
        if self.default_max_iterations > self.max_iterations_limit:
            raise ValueError("formalize.default_max_iterations exceeds max_iterations_limit")
        if not 1 <= self.default_candidates <= self.max_candidates:
            raise ValueError("formalize.default_candidates must be between 1 and max_candidates")
        if self.job_budget_s < 0 or self.stream_budget_s < 0:
            raise ValueError("formalize.job_budget_s and stream_budget_s must be >= 0")
        if self.retrieval_top_k < 0 or self.did_you_mean_k < 0:
            raise ValueError("formalize.retrieval_top_k and did_you_mean_k must be >= 0")
        if self.retrieval_embedder not in ("wordllama", "none") and not (
            self.retrieval_embedder.startswith("sentence-transformers:")
        ):
            raise ValueError(
                "formalize.retrieval_embedder must be wordllama, none or "
                f"sentence-transformers:<path>, not {self.retrieval_embedder!r}"
            )
        if self.retrieval_dense_n < 1:
            raise ValueError("formalize.retrieval_dense_n must be >= 1")

    def names_available(self) -> bool:
        return bool(self.mathlib_names_path) and os.path.isfile(self.mathlib_names_path)
