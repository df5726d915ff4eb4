"""verl's shape: `compute_score` for `reward.custom_reward_function.path` / `.name`.

Owns the verl adapter. verl 0.9 loads this file by its path
(`verl.utils.import_utils.load_extern_object`: `spec_from_file_location`, no
package), so it imports the reward package absolutely, from whichever install
holds it. verl calls `compute_score(data_source=…, solution_str=…,
ground_truth=…, extra_info=…, **reward_kwargs)` once per sample (sync ones in an
executor, `async def` ones awaited), logs every key of a returned dict, and cannot
pass constructor arguments: the server is $LEANRPC_SERVER, the token $LEANRPC_TOKEN
(or `reward_kwargs`: server, token, kind, deadline_s, timeout_s, fence, weights).

`ground_truth` is the formal statement (the reference formalization with
kind="formalization"); `extra_info["header"]` its header when the data has one.
Concurrent per-sample calls are batched (batching.py): one Verify call per wave.
Every answer has the same keys: `score` (1.0 / 0.0 / the composite reward, NaN on
an infrastructure failure) and the `lean_*` details. `compute_score_batch` is the
older BatchRewardManager's list form.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

try:  # the client's own distribution, else the server's install
    _pkg = importlib.import_module("leanrpc_client.rewards")
except ImportError:
    _pkg = importlib.import_module("leanrpc.client.rewards")

_batching = importlib.import_module(_pkg.__name__ + ".batching")
_connection = importlib.import_module(_pkg.__name__ + ".connection")

_SETTINGS = (
    "server",
    "token",
    "fence",
    "deadline_s",
    "timeout_s",
    "timeout_is_failure",
    "header",
    "check_axioms",
    "pin_statement",
    "max_retries",
)
_scorers: dict[tuple, Any] = {}


def _scorer(kind: str, options: dict):
    unknown = set(options) - set(_SETTINGS) - {"weights", "triviality"}
    if unknown:
        raise TypeError(f"unknown reward_kwargs {sorted(unknown)}; known: {list(_SETTINGS)}")
    settings = {k: options[k] for k in _SETTINGS if k in options}
    key = (kind, tuple(sorted((k, repr(v)) for k, v in options.items())))
    scorer = _scorers.get(key)
    if scorer is None:
        if kind == "formalization":
            scorer = _pkg.FormalizationReward(
                weights=options.get("weights"), triviality=options.get("triviality"), **settings
            )
        elif kind == "proof":
            scorer = _pkg.RewardCore(**settings)
        else:
            raise ValueError(f"kind must be 'proof' or 'formalization', not {kind!r}")
        _scorers[key] = scorer
    return scorer


def as_verl(detail) -> dict[str, Any]:
    """The dict verl logs: the same keys for every sample (verl stacks them per key)."""
    return {
        "score": math.nan if detail.reward is None else detail.reward,
        "lean_status": detail.status,
        "lean_reason": detail.reason[:500],
        "lean_extraction": f"{detail.extraction_rule}@{detail.extraction_version}",
        "lean_checks": ",".join(f"{k}={v}" for k, v in sorted(detail.checks.items())),
        "lean_axioms": ",".join(detail.axioms),
        "lean_time_s": detail.time_s,
        "lean_cache": detail.cache_source,
        "lean_infra_error": detail.infra_error,
    }


def _args(kind: str, solution_str: str, ground_truth: str, extra_info: dict | None):
    header = str((extra_info or {}).get("header") or "")
    if kind == "formalization":
        return (solution_str, ground_truth, header)
    return (solution_str, _pkg.Problem(ground_truth, header) if ground_truth else None)


async def compute_score_async(
    data_source: str = "",
    solution_str: str = "",
    ground_truth: str = "",
    extra_info: dict | None = None,
    kind: str = "proof",
    **options,
) -> dict[str, Any]:
    """`compute_score` as a coroutine (verl awaits an `async def` compute_score)."""
    scorer = _scorer(kind, options)
    detail = await _batching.score_one(scorer, *_args(kind, solution_str, ground_truth, extra_info))
    return as_verl(detail)


def compute_score(
    data_source: str = "",
    solution_str: str = "",
    ground_truth: str = "",
    extra_info: dict | None = None,
    kind: str = "proof",
    **options,
) -> dict[str, Any]:
    """One sample's reward dict; safe from verl's executor threads and Ray actors."""
    coro = compute_score_async(data_source, solution_str, ground_truth, extra_info, kind, **options)
    return _connection.sync_runner().run(coro)


def compute_score_batch(
    data_sources, solution_strs, ground_truths, extra_infos=None, kind: str = "proof", **options
) -> list[dict[str, Any]]:
    """BatchRewardManager's form: lists in, one dict per sample out, one call."""
    extra_infos = extra_infos if extra_infos is not None else [None] * len(solution_strs)
    scorer = _scorer(kind, options)
    columns = list(
        zip(*(_args(kind, s, g, e) for s, g, e in zip(solution_strs, ground_truths, extra_infos)))
    )
    details = _connection.sync_runner().run(scorer.score(*columns)) if columns else []
    return [as_verl(d) for d in details]
