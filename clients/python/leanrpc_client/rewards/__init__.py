"""Rewards for RL trainers over leanrpc's verdicts (docs/REWARDS.md).

    from leanrpc.rewards import LeanReward        # inside the server's install
    from leanrpc_client.rewards import LeanReward  # the client's own distribution

Rooms: extraction (the code out of a completion, versioned rules), problem (the
statement that pins it), core (the one scoring core and verdict table),
formalization (the composite gated reward, scored by the server), connection (one
channel per process), and one adapter per trainer: trl (`LeanReward`,
`AsyncLeanReward`), verl (`compute_score`), openrlhf (`reward_func` and the
POST /reward payloads), verifiers (`lean_rubric_reward`, `lean_trace_reward`); batching
(per-sample callers gathered into one call). Imports no server code.
"""

from .core import DEFAULT_DEADLINE_S, VERDICTS, Detail, InfraFailure, RewardCore
from .extraction import EXTRACTION_VERSION, NO_CODE, Extracted, extract
from .formalization import FormalizationReward
from .problem import Problem
from .trl import AsyncLeanReward, LeanReward

__all__ = [
    "AsyncLeanReward",
    "DEFAULT_DEADLINE_S",
    "Detail",
    "EXTRACTION_VERSION",
    "Extracted",
    "FormalizationReward",
    "InfraFailure",
    "LeanReward",
    "NO_CODE",
    "Problem",
    "RewardCore",
    "VERDICTS",
    "extract",
]
