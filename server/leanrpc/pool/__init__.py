"""Pool layer: admission, routing, running jobs, supervising workers.

Owns which worker serves which job, how many workers exist, and when one is
replaced. May import: config, errors, results, core, repl, worker. Never
imports services, edge, or any `*_pb2`. See pool.py for the data flow.

This facade is the only way in from above: the layers above import these
names and no pool module, and use a pool only through `PoolPort` (services,
cache) or `PoolOwner` (the composition root, metrics, commands); both are in
ports.py, and tests/arch/test_pool_port.py holds every module above to them.
"""

from .canary import CanaryProbe, CanarySource, CanaryStats, Claim
from .job import (
    BodyJob,
    BodyOutcome,
    CallJob,
    CallOutcome,
    Job,
    SessionJob,
    SessionOutcome,
    WorkerCall,
)
from .pool import Pool
from .ports import PoolOwner, PoolPort
from .replay import replay, resume_point
from .sessions import (
    ROOT_ENV,
    Session,
    SessionCall,
    SessionRegistry,
    code_bytes,
    held_cost,
    str_bytes,
)
from .slot import WorkerHandle
from .stats import PoolMetrics, PoolSnapshot, PoolStats, WorkerInfo, WorkerReport

__all__ = [
    "BodyJob",
    "BodyOutcome",
    "CallJob",
    "CallOutcome",
    "CanaryProbe",
    "CanarySource",
    "CanaryStats",
    "Claim",
    "Job",
    "Pool",
    "PoolMetrics",
    "PoolOwner",
    "PoolPort",
    "PoolSnapshot",
    "PoolStats",
    "ROOT_ENV",
    "Session",
    "SessionCall",
    "SessionJob",
    "SessionOutcome",
    "SessionRegistry",
    "WorkerCall",
    "WorkerHandle",
    "WorkerInfo",
    "WorkerReport",
    "code_bytes",
    "held_cost",
    "replay",
    "resume_point",
    "str_bytes",
]
