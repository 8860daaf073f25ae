"""Exceptions: one class per protocol error code (docs/rpc.md, "Errors").

Every error the agent answers is raised as an :class:`RPCError` subclass
chosen by its ``code``; ``data`` is the server's ``data`` member (for
``-32003`` the list of problems, for ``-32004`` ``retry_after_ms``).
Match on the class (or ``code``), never on the message.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Type


class FlowdError(Exception):
    """Base of every exception this package raises."""


class RPCError(FlowdError):
    """An error answer of the agent: ``code``, ``message`` and ``data``."""

    code: int = 0
    name: str = "error"

    def __init__(self, message: str, data: Any = None, code: Optional[int] = None, method: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.method = method
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        where = f"{self.method}: " if self.method else ""
        return f"{where}{self.message} (code {self.code})"


class ParseError(RPCError):
    code, name = -32700, "parse_error"


class InvalidRequest(RPCError):
    code, name = -32600, "invalid_request"


class MethodNotFound(RPCError):
    code, name = -32601, "method_not_found"


class InvalidParams(RPCError):
    code, name = -32602, "invalid_params"


class InternalError(RPCError):
    code, name = -32603, "internal"


class NotFound(RPCError):
    code, name = -32001, "not_found"


class IllegalTransition(RPCError):
    code, name = -32002, "illegal_transition"


class InvalidSpec(RPCError):
    """``-32003``: ``problems`` lists every problem ``{code, path, message}``."""

    code, name = -32003, "invalid_spec"

    @property
    def problems(self) -> List[Any]:
        if isinstance(self.data, dict):
            return list(self.data.get("problems") or [])
        return []


class Unavailable(RPCError):
    """``-32004``: no leader / not enough nodes; retryable after ``retry_after_ms``."""

    code, name = -32004, "unavailable"

    @property
    def retry_after_ms(self) -> int:
        if isinstance(self.data, dict):
            try:
                return int(self.data.get("retry_after_ms") or 0)
            except (TypeError, ValueError):
                return 0
        return 0


class TooManyRuns(RPCError):
    code, name = -32005, "too_many_runs"


class TooLarge(RPCError):
    code, name = -32006, "too_large"


class PermissionDenied(RPCError):
    """``-32007``: ``data`` names the ``method``, the caller's ``role`` and what it ``needs``."""

    code, name = -32007, "permission_denied"


_BY_CODE: Dict[int, Type[RPCError]] = {
    c.code: c
    for c in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        NotFound,
        IllegalTransition,
        InvalidSpec,
        Unavailable,
        TooManyRuns,
        TooLarge,
        PermissionDenied,
    )
}


def error_from_response(err: Dict[str, Any], method: str = "") -> RPCError:
    """The exception for a JSON-RPC error object."""
    try:
        code = int(err.get("code", 0))
    except (TypeError, ValueError):
        code = 0
    msg = str(err.get("message", "")) or "error"
    cls = _BY_CODE.get(code, RPCError)
    return cls(msg, err.get("data"), code=code, method=method)


class ConnectionLost(FlowdError):
    """The call failed because of the connection, not the agent's answer.

    ``sent`` is False when the request was certainly not written (the dial
    failed or the connection was already broken): any call may be retried.
    """

    def __init__(self, endpoint: str, cause: str, sent: bool = True) -> None:
        hint = "" if sent else " (is a flowd agent listening there?)"
        super().__init__(f"connection to {endpoint} failed: {cause}{hint}")
        self.endpoint = endpoint
        self.sent = sent


class Timeout(FlowdError):
    """A call's deadline passed before the agent answered."""


class ClientClosed(FlowdError):
    """The client was closed."""


class RunFailed(FlowdError):
    """Raised by :meth:`flowd.Client.wait` with ``raise_on_failure=True``: the run ended other than succeeded."""

    def __init__(self, run: Dict[str, Any]) -> None:
        super().__init__(f"run {run.get('id')} ended {run.get('state')}")
        self.run = run


class Retryable(FlowdError):
    """Raise from a handler to fail the attempt and let the task's retry policy retry it.

    Any other exception does the same; this class exists for symmetry with
    :class:`NonRetryable` and to carry a message.
    """


class NonRetryable(FlowdError):
    """Raise from a handler to fail the task without further attempts."""


def is_unavailable(e: BaseException) -> bool:
    """True for errors a caller may retry after a pause: -32004 or a lost connection."""
    return isinstance(e, (Unavailable, ConnectionLost, Timeout))
