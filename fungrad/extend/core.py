"""``jax.extend.core``: jaxpr types and the trace state, as library code reaches for them.

The jaxpr classes are fungrad's own (:mod:`fungrad.core`): a ``ClosedJaxpr`` from
``fungrad.make_jaxpr`` has ``jaxpr``, ``consts``, ``in_avals``, ``out_avals``; a ``Jaxpr``
has ``constvars``, ``invars``, ``eqns``, ``outvars``; a ``JaxprEqn`` has ``primitive``,
``invars``, ``outvars``, ``params``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fungrad import core as _core
from fungrad.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var

__all__ = [
    "ClosedJaxpr",
    "DebugInfo",
    "Jaxpr",
    "JaxprEqn",
    "Literal",
    "Var",
    "check_jaxpr",
    "find_top_trace",
    "get_opaque_trace_state",
    "jaxpr_as_fun",
]


class DebugInfo(NamedTuple):
    """What a function was traced for (``"jit"``, ``"scan"``...), ``"name at file:line"``,
    the flattened arguments' names (None: unknown) and the results' paths (None: unknown)."""

    traced_for: str
    func_src_info: str
    arg_names: tuple[str, ...] | None
    result_paths: Any = None

    @property
    def func_name(self) -> str:
        return self.func_src_info.split(" ")[0]

    def replace_func_name(self, name: str) -> DebugInfo:
        rest = self.func_src_info.split(" ", 1)[1:]
        return self._replace(func_src_info=" ".join([name, *rest]))

    def resolve_result_paths(self) -> DebugInfo:
        if callable(self.result_paths):
            return self._replace(result_paths=tuple(self.result_paths()))
        return self

    def safe_arg_names(self, expected: int) -> tuple[str, ...]:
        names = self.arg_names
        return names if names is not None and len(names) == expected else ("",) * expected

    def safe_result_paths(self, expected: int) -> tuple[str, ...]:
        paths = self.result_paths
        ok = isinstance(paths, tuple) and len(paths) == expected
        return paths if ok else ("",) * expected


class OpaqueTraceState:
    """The trace that was current when it was made; two are equal when they name the same
    trace (library code compares them to notice that a value crossed a transform boundary)."""

    __slots__ = ("_trace",)

    def __init__(self, trace):
        self._trace = trace

    def __eq__(self, other):
        return isinstance(other, OpaqueTraceState) and other._trace is self._trace

    def __hash__(self):
        return id(self._trace)


def get_opaque_trace_state(convention=None) -> OpaqueTraceState:
    """The current trace's state, comparable with ``==`` (``convention`` names the caller, as
    in JAX, and changes nothing)."""
    del convention
    return OpaqueTraceState(_core.current_trace())


def find_top_trace(_xs=None):
    """The current trace (JAX's answer since traces became explicit; the argument is
    ignored, as there)."""
    return _core.current_trace()


def jaxpr_as_fun(closed: ClosedJaxpr):
    """``closed`` as a function of its inputs returning the list of its outputs, binding each
    equation under whatever trace is current (so it can be transformed further)."""

    def fun(*args):
        return _core.eval_jaxpr(closed.jaxpr, closed.consts, *args)

    return fun


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Check that ``jaxpr`` is well typed: each variable defined once before it is used, each
    equation's outputs what its primitive's abstract evaluation gives (a JaxprTypeError)."""
    _core.typecheck_jaxpr(jaxpr)
