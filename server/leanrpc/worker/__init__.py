"""Worker layer: one REPL process per Worker, started by a Launcher."""

from .launcher import LaunchSpec, Launcher, rlimits_from_config
from .worker import ExitCause, ShutdownRung, Worker, WorkerState

__all__ = ["ExitCause", "LaunchSpec", "Launcher", "ShutdownRung", "Worker", "WorkerState", "rlimits_from_config"]
