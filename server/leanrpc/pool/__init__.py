"""Pool layer: admission, routing, running jobs, supervising workers.

Owns which worker serves which job, how many workers exist, and when one is
replaced. May import: config, errors, results, core, worker. Never imports
services, edge, or any `*_pb2`. See pool.py for the data flow.
"""

from .job import BodyOutcome, Job, WorkerCall
from .pool import Pool, PoolSnapshot, PoolStats

__all__ = ["BodyOutcome", "Job", "Pool", "PoolSnapshot", "PoolStats", "WorkerCall"]
