"""``jax._src.traceback_util`` for libraries that register their files with it.

JAX hides its own (and registered libraries') frames from tracebacks of errors raised through
its API functions. fungrad shows whole tracebacks, so registering a path only records it
(``_exclude_paths``) and :func:`api_boundary` returns the function it decorates unchanged."""

from __future__ import annotations

_exclude_paths: list[str] = []


def register_exclusion(path: str) -> None:
    """Record ``path`` as a library's (fungrad keeps its frames in tracebacks)."""
    if path not in _exclude_paths:
        _exclude_paths.append(path)


def api_boundary(fun=None, **_options):
    """Mark ``fun`` as an API entry point; fungrad filters no tracebacks, so ``fun`` itself is
    returned (usable as ``@api_boundary`` and ``@api_boundary(...)``)."""
    if fun is None:
        return lambda f: f
    return fun
