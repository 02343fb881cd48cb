"""``jax.interpreters.partial_eval``: run a function on partly known inputs.

:func:`trace_to_jaxpr_nounits` calls a :class:`~fungrad.extend.linear_util.WrappedFun` with
each input either *known* (a value) or *unknown* (an abstract value): what depends only on
known inputs is computed now, what touches an unknown input is staged into a jaxpr. Library
code uses it to find which outputs of a function are independent of some inputs and compute
them (flax's lifted ``scan`` and ``lazy_init``). :func:`trace_to_jaxpr_dynamic` stages a whole
function. Both run on fungrad's :class:`~fungrad.transforms.partial_eval.PartialEvalTrace`
and staging trace, the machinery behind ``linearize`` and ``jit``.
"""

from __future__ import annotations

from fungrad import core
from fungrad.transforms.partial_eval import PartialEvalTrace
from fungrad.transforms.staging import trace_to_jaxpr

__all__ = ["PartialVal", "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits"]


class PartialVal(tuple):
    """``(aval, None)`` for an unknown value of abstract value ``aval``, ``(None, value)``
    for a known one."""

    __slots__ = ()

    def __new__(cls, xs: tuple):
        aval, const = xs
        if aval is not None and const is not None:
            raise ValueError("PartialVal: give an abstract value or a known value, not both")
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, const) -> PartialVal:
        return cls((None, const))

    @classmethod
    def unknown(cls, aval) -> PartialVal:
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self):
        """The known value, or None for an unknown one."""
        return self[1] if self[0] is None else None

    def get_aval(self):
        """The abstract value: the unknown's, or the known value's."""
        return self[0] if self[0] is not None else core.get_aval(self[1])


def trace_to_jaxpr_nounits(fun, pvals, instantiate=False):
    """Call ``fun`` (a WrappedFun of flat inputs) on ``pvals``: returns ``(jaxpr, out_pvals,
    consts)``, where ``out_pvals`` are the outputs, known (computed now) or unknown, and
    ``jaxpr`` (with ``consts`` for its constvars) computes the unknown outputs from the
    unknown inputs. ``instantiate`` (a bool, or one per output) makes known outputs unknown
    outputs of the jaxpr."""
    pvals = list(pvals)
    pe = PartialEvalTrace(core.current_trace())
    unknown_in = [pe.new_arg(pv[0]) for pv in pvals if pv[0] is not None]
    it = iter(unknown_in)
    args = [next(it) if pv[0] is not None else pv[1] for pv in pvals]
    with core.set_current_trace(pe):
        outs = list(fun.call_wrapped(*args))
        if isinstance(instantiate, bool):
            instantiate = [instantiate] * len(outs)
        outs = [pe.to_tracer(o) if inst else o for o, inst in zip(outs, instantiate)]
    unknown_out = [o for o in outs if pe.is_unknown(o)]
    out_pvals = [
        PartialVal.unknown(o.aval) if pe.is_unknown(o) else PartialVal.known(o) for o in outs
    ]
    closed = pe.to_jaxpr(unknown_in, unknown_out)
    return closed.jaxpr, out_pvals, list(closed.consts)


def trace_to_jaxpr_dynamic(fun, in_avals, *, keep_inputs=None, lower=False, auto_dce=False):
    """Stage ``fun`` (a WrappedFun of flat inputs) at ``in_avals``: returns ``(jaxpr,
    out_avals, consts)``. ``keep_inputs`` (one bool per input) drops the inputs marked False
    from the jaxpr's invars (they must be unused); ``lower`` and ``auto_dce`` are accepted for
    JAX's signature and change no value (fungrad stages no higher-level forms, and its
    compiler removes dead code anyway)."""
    del lower, auto_dce
    closed = trace_to_jaxpr(lambda *xs: list(fun.call_wrapped(*xs)), list(in_avals))
    jaxpr = closed.jaxpr
    if keep_inputs is not None and not all(keep_inputs):
        dropped = {v for v, keep in zip(jaxpr.invars, keep_inputs) if not keep}
        used = {v for eqn in jaxpr.eqns for v in eqn.invars} | set(jaxpr.outvars)
        if dropped & used:
            raise ValueError("trace_to_jaxpr_dynamic: keep_inputs drops an input the function uses")
        invars = [v for v, keep in zip(jaxpr.invars, keep_inputs) if keep]
        jaxpr = core.Jaxpr(jaxpr.constvars, invars, jaxpr.eqns, jaxpr.outvars)
    return jaxpr, [v.aval for v in jaxpr.outvars], list(closed.consts)
