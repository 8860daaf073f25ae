"""flowd: the Python client and worker SDK of the flowd workflow engine.

Standard library only. ``Client`` submits and steers runs; ``Worker`` runs
task handlers. See docs/python.md.
"""

from __future__ import annotations

from .client import DONE_STATES, Client, EventsLost, default_addr, load_spec, new_run_id
from .errors import (ClientClosed, ConnectionLost, FlowdError, IllegalTransition, InternalError, InvalidParams,
                     InvalidRequest, InvalidSpec, MethodNotFound, NonRetryable, NotFound, ParseError,
                     PermissionDenied, Retryable, RPCError, RunFailed, Timeout, TooLarge, TooManyRuns,
                     Unavailable)
from ._logs import TaskLogHandler
from .worker import Cancelled, Registry, TaskContext, Worker, default_registry, task

__version__ = "0.1.0"

__all__ = [
    "Client", "Worker", "TaskContext", "Registry", "task", "default_registry", "TaskLogHandler",
    "DONE_STATES", "EventsLost", "default_addr", "load_spec", "new_run_id", "Cancelled",
    "FlowdError", "RPCError", "ParseError", "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError",
    "NotFound", "IllegalTransition", "InvalidSpec", "Unavailable", "TooManyRuns", "TooLarge", "PermissionDenied",
    "ConnectionLost", "Timeout", "ClientClosed", "RunFailed", "Retryable", "NonRetryable",
]
