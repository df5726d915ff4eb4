"""Pool layer: routing, admission, supervision."""

from .pool import BodyOutcome, Job, Pool, PoolStats

__all__ = ["BodyOutcome", "Job", "Pool", "PoolStats"]
