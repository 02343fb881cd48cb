"""The ``jit`` call primitive, ``jit_p``, and its rules.

``jit_p``'s params are the traced ``jaxpr`` (a ClosedJaxpr), the function's ``name`` and, for
the GPU, ``backend='gpu'``. Its impl runs the jaxpr's executable (compiled once per jaxpr
object); its jvp, partial-evaluation, transpose and batching rules transform the jaxpr (memoised
per jaxpr object) and bind ``jit_p`` again, so ``grad(jit(f))``, ``jit(grad(f))``,
``vmap(jit(f))`` and ``jit(jit(f))`` compose and every piece still runs compiled. The user-facing
``jit`` (fungrad/transforms/jit.py) binds it whenever a transform is active.
"""

from __future__ import annotations

import time

from fungrad import core
from fungrad.config import config
from fungrad.core import EvalTrace, set_current_trace
from fungrad.ir.passes import jaxpr_has_effects
from fungrad.lowering import profile as step_profile
from fungrad.transforms.compile_log import log_compile
from fungrad.transforms.jvp import Zero, jvp_jaxpr, jvp_rules, tangent_aval
from fungrad.transforms.memo import JaxprMemo
from fungrad.transforms.partial_eval import partial_eval_jaxpr, partial_eval_rules
from fungrad.transforms.staging import trace_to_jaxpr
from fungrad.transforms.transpose import (
    UndefPrimal,
    backward_pass,
    is_undefined_primal,
    transpose_rules,
)
from fungrad.transforms.vmap import batch_jaxpr, batch_rules, current_rule_axis_name, moveaxis

__all__ = ["backend_param", "compile_executable", "executable", "jit_p"]


_memo = JaxprMemo(2048)
"""Transformed jaxprs (small)."""

_exe_memo = JaxprMemo(128)
"""Executables of jaxprs bound as ``jit`` equations outside the hot path (transformed jaxprs
evaluated eagerly, jit calls inside eagerly run control flow). ~200 KB of machine code each,
hence the smaller bound; the hot path keeps its executables on the jitted function instead."""


def compile_executable(jaxpr: core.ClosedJaxpr, backend: str, name: str, profile: bool = False):
    """Compile ``jaxpr`` for ``backend`` (each call compiles: callers keep the result);
    ``profile``: the build ``fungrad.profile()`` runs, which times each step."""
    from fungrad import lowering

    # Compiling is concrete work: no transform may see the passes' own computations.
    with set_current_trace(EvalTrace()):
        if profile:
            return lowering.compile_jaxpr(jaxpr, backend=backend, name=name, profile=True)
        return lowering.compile_jaxpr(jaxpr, backend=backend, name=name)


def executable(jaxpr: core.ClosedJaxpr, name: str, backend: str = "cpu"):
    """The executable of ``jaxpr``, compiled once per jaxpr object and backend (while a
    ``fungrad.profile()`` is open, the build that times each step); with ``log_compiles``
    each compile is logged."""
    profile = bool(step_profile.sinks)

    def make():
        t0 = time.perf_counter()
        if profile:
            exe = compile_executable(jaxpr, backend, name, profile=True)
        else:
            exe = compile_executable(jaxpr, backend, name)
        if config.log_compiles:
            label = f"jit({name}) inside a transform" + " (profiled)" * profile
            elapsed = time.perf_counter() - t0
            log_compile(label, name, None, jaxpr.in_avals, backend, exe, elapsed)
        return exe

    return _exe_memo.get(jaxpr, (backend, profile), make)


def backend_param(backend: str) -> dict:
    """The jit equation's ``backend`` param: absent for the default CPU (jaxprs print as
    before), ``backend='gpu'`` otherwise."""
    return {} if backend == "cpu" else {"backend": backend}


def _jit_impl(*args, jaxpr, name, backend="cpu"):
    exe = executable(jaxpr, name, backend)
    return [o._value for o in exe.call(list(args))]


def _jit_abstract_eval(*avals, jaxpr, name, backend="cpu"):
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(
        a.strip_weak_type() != b.strip_weak_type() for a, b in zip(avals, expected)
    ):
        got = ", ".join(a.str_short() for a in avals)
        want = ", ".join(a.str_short() for a in expected)
        raise TypeError(f"jit[name={name}]: the jaxpr takes ({want}) but the call passes ({got})")
    return jaxpr.out_avals


jit_p = core.Primitive("jit", multiple_results=True)
jit_p.impl = _jit_impl
jit_p.abstract_eval = _jit_abstract_eval


def _jit_jvp(primals, tangents, *, jaxpr, name, backend="cpu"):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jvp_j, out_nz = _memo.get(
        jaxpr, ("jvp", nonzeros), lambda: jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    )
    outs = jit_p.bind(
        *primals,
        *[t for t in tangents if type(t) is not Zero],
        jaxpr=jvp_j,
        name=name,
        **backend_param(backend),
    )
    n = len(jaxpr.out_avals)
    t_it = iter(outs[n:])
    return outs[:n], [
        next(t_it) if nz else Zero(tangent_aval(a)) for nz, a in zip(out_nz, jaxpr.out_avals)
    ]


def _jit_partial_eval(trace, args, params):
    # The known part runs now, as a jit call in the enclosing trace (compiled when that is the
    # eager one); the unknown part is staged as a jit equation reading the residuals.
    jaxpr, name = params["jaxpr"], params["name"]
    where = backend_param(params.get("backend", "cpu"))
    unknowns = tuple(trace.is_unknown(a) for a in args)
    known_j, unknown_j, out_uk, n_res = _memo.get(
        jaxpr,
        ("partial_eval", unknowns),
        lambda: partial_eval_jaxpr(jaxpr, unknowns, instantiate=False),
    )
    known_out = []
    # A part with no outputs still runs when it has effects (a debug.print inside the jit).
    if known_j.out_avals or jaxpr_has_effects(known_j.jaxpr):
        with set_current_trace(trace.parent):
            known_out = jit_p.bind(
                *[a for a, u in zip(args, unknowns) if not u], jaxpr=known_j, name=name, **where
            )
    n_known = len(known_out) - n_res
    residuals = known_out[n_known:]
    unknown_out = []
    if any(out_uk) or jaxpr_has_effects(unknown_j.jaxpr):
        unknown_out = trace.stage(
            jit_p,
            [*residuals, *[a for a, u in zip(args, unknowns) if u]],
            dict(jaxpr=unknown_j, name=name, **where),
        )
    k_it, u_it = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u_it) if u else next(k_it) for u in out_uk]


def _transpose_jaxpr(jaxpr: core.ClosedJaxpr, linear, ct_nonzero):
    """The transpose of ``jaxpr`` as a jaxpr taking ``(*non-linear inputs, *nonzero output
    cotangents)`` and returning the nonzero cotangents of the linear inputs; also returns which
    of the linear inputs' cotangents are nonzero."""
    res_avals = [a for a, lin in zip(jaxpr.in_avals, linear) if not lin]
    ct_avals = [tangent_aval(a) for a, nz in zip(jaxpr.out_avals, ct_nonzero) if nz]
    out_nz: list[bool] = []

    def transposed(*xs):
        res, cts = iter(xs[: len(res_avals)]), iter(xs[len(res_avals) :])
        args = [UndefPrimal(a) if lin else next(res) for a, lin in zip(jaxpr.in_avals, linear)]
        cts_out = [
            next(cts) if nz else Zero(tangent_aval(a)) for a, nz in zip(jaxpr.out_avals, ct_nonzero)
        ]
        cts_in = backward_pass(jaxpr.jaxpr, jaxpr.consts, args, cts_out)
        lin_cts = [ct for ct, lin in zip(cts_in, linear) if lin]
        out_nz[:] = [ct is not None and type(ct) is not Zero for ct in lin_cts]
        return [ct for ct, nz in zip(lin_cts, out_nz) if nz]

    closed = trace_to_jaxpr(transposed, res_avals + ct_avals)
    return closed, tuple(out_nz)


def _jit_transpose(cts, *args, jaxpr, name, backend="cpu"):
    linear = tuple(is_undefined_primal(a) for a in args)
    ct_nonzero = tuple(type(ct) is not Zero for ct in cts)
    zeros = [Zero(tangent_aval(a.aval)) if lin else None for a, lin in zip(args, linear)]
    if not any(ct_nonzero):
        return zeros
    t_jaxpr, out_nz = _memo.get(
        jaxpr,
        ("transpose", linear, ct_nonzero),
        lambda: _transpose_jaxpr(jaxpr, linear, ct_nonzero),
    )
    outs = iter(
        jit_p.bind(
            *[a for a, lin in zip(args, linear) if not lin],
            *[ct for ct in cts if type(ct) is not Zero],
            jaxpr=t_jaxpr,
            name=name,
            **backend_param(backend),
        )
        if any(out_nz)
        else []
    )
    nz_it = iter(out_nz)
    return [(next(outs) if next(nz_it) else z) if lin else None for z, lin in zip(zeros, linear)]


def _jit_batch(axis_size, args, dims, *, jaxpr, name, backend="cpu"):
    batched = tuple(d is not None for d in dims)
    # The axis name is part of the key: a collective over it is reduced by that vmap only.
    new_j, out_b = _memo.get(
        jaxpr,
        ("batch", axis_size, batched, current_rule_axis_name()),
        lambda: batch_jaxpr(jaxpr, axis_size, batched, instantiate=False),
    )
    vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(args, dims)]
    outs = jit_p.bind(*vals, jaxpr=new_j, name=name, **backend_param(backend))
    return outs, [0 if b else None for b in out_b]


jvp_rules[jit_p] = _jit_jvp
partial_eval_rules[jit_p] = _jit_partial_eval
transpose_rules[jit_p] = _jit_transpose
batch_rules[jit_p] = _jit_batch
