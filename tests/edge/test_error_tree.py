"""The error tree: only bad input is a RequestError, and the one table maps
each family to its own status code (issue 27: `except RequestError` used to
also catch "queue full", a missing header and a bad config)."""

from __future__ import annotations

import grpc
import pytest

from leanrpc import errors
from leanrpc.config import ConfigError as ConfigErrorFromConfig
from leanrpc.edge.auth import AccessConfigError
from leanrpc.edge.errors import rich_status, status_for

NOT_BAD_INPUT = [
    errors.OverloadedError("queue full", retry_after_s=2.0),
    errors.AuthError("no token"),
    errors.PermissionDenied("profile 'internal' is not open to this caller"),
    errors.HeaderLoadError("unknown module Foo"),
    errors.ConfigError("config key pool.workers must be >= 1"),
    AccessConfigError("refusing to serve 0.0.0.0 without authentication"),
    errors.WorkerTimeout("ran past 5 s"),
    errors.NotServingError("shutting down"),
]


@pytest.mark.parametrize("exc", NOT_BAD_INPUT, ids=lambda e: type(e).__name__)
def test_only_bad_input_is_a_request_error(exc):
    assert isinstance(exc, errors.LeanServiceError)
    assert not isinstance(exc, errors.RequestError)
    try:
        raise exc
    except errors.RequestError:  # the handler every door has for bad input
        pytest.fail(f"{type(exc).__name__} was caught as bad input")
    except errors.LeanServiceError:
        pass


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.RequestError("bad", field="snippets[0]"), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.NotFoundError("no session s"), grpc.StatusCode.NOT_FOUND),
        (errors.OverloadedError("queue full"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.AuthError("no token"), grpc.StatusCode.UNAUTHENTICATED),
        (errors.PermissionDenied("not yours"), grpc.StatusCode.PERMISSION_DENIED),
        (errors.HeaderLoadError("unknown module"), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.ConfigError("bad key"), grpc.StatusCode.FAILED_PRECONDITION),
        (errors.WorkerTimeout("late"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (errors.WorkerOutOfMemory("big"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.WorkerCrashed("gone"), grpc.StatusCode.UNAVAILABLE),
        (errors.ModelNotConfigured("no weights"), grpc.StatusCode.FAILED_PRECONDITION),
        (errors.NotServingError("circuit open"), grpc.StatusCode.UNAVAILABLE),
        (errors.FrameTooLarge("huge"), grpc.StatusCode.INTERNAL),
        (RuntimeError("a bug"), grpc.StatusCode.INTERNAL),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.name,
)
def test_each_family_has_its_own_code(exc, code):
    assert status_for(exc) == code


def test_overload_keeps_its_retry_hint_and_is_not_a_field_violation():
    status = rich_status(errors.OverloadedError("queue full", retry_after_s=3.0))
    kinds = {packed.type_url.rsplit(".", 1)[-1] for packed in status.details}
    assert kinds == {"ErrorInfo", "RetryInfo"}


def test_config_error_is_one_class_wherever_it_is_imported_from():
    assert ConfigErrorFromConfig is errors.ConfigError
    assert issubclass(AccessConfigError, errors.ConfigError)
    assert issubclass(errors.ConfigError, ValueError)  # msgspec-style callers still catch it
