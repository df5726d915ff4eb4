"""`leanrpc.rewards.verl`: verl's `compute_score` (leanrpc.client.rewards.verl) under the
server package's name; either file works as `reward.custom_reward_function.path`.
May import: leanrpc.client.rewards.verl.
"""

from leanrpc.client.rewards.verl import compute_score, compute_score_async, compute_score_batch

__all__ = ["compute_score", "compute_score_async", "compute_score_batch"]
