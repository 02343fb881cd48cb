"""cond and switch: the ``cond`` primitive with all its rules."""

from __future__ import annotations

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.lax.control_flow.common import check_same_avals, check_same_outputs, eval_closed
from fungrad.lax.utils import operand as as_operand  # (cond's keyword is named operand)
from fungrad.lax.utils import standard_primitive
from fungrad.lowering import control_flow as control_flow_lowering
from fungrad.lowering import kernel
from fungrad.transforms.jvp import Zero, instantiate_zeros, jvp_jaxpr, jvp_rules, tangent_aval
from fungrad.transforms.partial_eval import partial_eval_rules
from fungrad.transforms.staging import trace_body, trace_to_jaxpr
from fungrad.transforms.transpose import (
    UndefPrimal,
    backward_pass,
    is_undefined_primal,
    transpose_rules,
)
from fungrad.transforms.vmap import batch_jaxpr, batch_rules, bdim_at_front, moveaxis

# -- cond / switch ---------------------------------------------------------------------------


def _cond_impl(index, *ops, branches):
    i = int(np.clip(index, 0, len(branches) - 1))
    return [
        np.asarray(o._value if type(o) is Array else o)[()]
        for o in eval_closed(branches[i], *[Array(x) for x in ops])
    ]


def _cond_abstract_eval(index, *ops, branches):
    if index.shape != () or dtypes.kind(index.dtype) not in "iu":
        raise TypeError(
            f"cond: the branch index must be an integer scalar, got {index.str_short()}"
        )
    for i, b in enumerate(branches):
        check_same_avals(f"cond branch {i} inputs", b.in_avals, ops, "")
    out = branches[0].out_avals
    for i, b in enumerate(branches[1:], 1):
        check_same_avals(
            f"cond branch {i} outputs",
            out,
            b.out_avals,
            "All branches must return the same pytree of shapes and dtypes.",
        )
    return [
        a.strip_weak_type() if any(a != b.out_avals[k] for b in branches) else a
        for k, a in enumerate(out)
    ]


cond_p = standard_primitive("cond", _cond_impl, _cond_abstract_eval, multiple_results=True)


_NO_OPERAND = object()


def _keyword_operand(what: str, operands: tuple, operand) -> tuple:
    """JAX's ``operand=`` keyword (one operand), exclusive with positional operands."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(
            f"{what}: pass the operands either positionally or as the one keyword "
            f"'operand', not both (got {len(operands)} positional operands and "
            "operand=...)"
        )
    return (operand,)


def switch(index, branches, *operands, operand=_NO_OPERAND):
    """Apply ``branches[index](*operands)``; ``index`` is clamped into range (JAX).

    ``operand=`` passes a single operand by keyword, as JAX allows."""
    operands = _keyword_operand("switch", operands, operand)
    if isinstance(branches, (str, bytes)) or not hasattr(branches, "__len__") or not branches:
        raise ValueError(
            f"switch: branches must be a non-empty sequence of functions, got {branches!r:.60}"
        )
    for i, b in enumerate(branches):
        if not callable(b):
            raise TypeError(
                f"switch: branches must be callable, but branch {i} is a "
                f"{type(b).__name__} ({b!r:.40})"
            )
    idx = as_operand(index, "switch index")
    if idx.shape != () or dtypes.kind(idx.dtype) not in "iub":
        raise TypeError(
            f"switch: the index must be an integer scalar, got {core.get_aval(idx).str_short()}"
        )
    from fungrad import lax

    idx = lax.convert_element_type(idx, np.int32)
    labels = [f"branch {i}" for i in range(len(branches))]
    return _switch("switch", idx, list(branches), labels, 0, operands)


def _switch(what: str, idx, branches, labels, ref: int, operands):
    """Trace every branch at the operands' avals, check that they agree with branch ``ref``
    (errors use ``labels``: ``true_fun``/``false_fun`` for cond), and bind ``cond_p``."""
    flat, in_tree = tree_util.tree_flatten(operands)
    flat = [as_operand(x, f"{what} operand") for x in flat]
    avals = [core.get_aval(x) for x in flat]
    traced = [
        trace_body(b, in_tree, avals, f"{what} {label}") for b, label in zip(branches, labels)
    ]
    named = [labels[ref]] + [la for i, la in enumerate(labels) if i != ref]
    fix = (
        f"Revise {' and/or '.join(named)} so that they return the same pytree of shapes and dtypes"
        if len(labels) <= 2
        else "Revise the branches so that they all return the same pytree of shapes and dtypes"
    )
    for i, (closed, _, tree) in enumerate(traced):
        if i != ref:
            check_same_outputs(
                f"{what}: {labels[ref]} and {labels[i]}",
                (labels[ref], branches[ref], traced[ref][2], traced[ref][0].out_avals),
                (labels[i], branches[i], tree, closed.out_avals),
                fix + ".",
            )
    out_tree = traced[0][2]
    # Every branch takes all branches' hoisted consts, then the operands.
    all_consts = [c for _, consts, _ in traced for c in consts]
    const_avals = [[core.get_aval(c) for c in consts] for _, consts, _ in traced]
    jaxprs = []
    for i, (closed, consts, _) in enumerate(traced):
        j = closed.jaxpr
        pre = [core.Var(a) for k in range(i) for a in const_avals[k]]
        post = [core.Var(a) for k in range(i + 1, len(traced)) for a in const_avals[k]]
        n = len(consts)
        invars = pre + j.invars[:n] + post + j.invars[n:]
        jaxprs.append(
            core.ClosedJaxpr(core.Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts)
        )
    outs = cond_p.bind(idx, *all_consts, *flat, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(out_tree, outs)


def cond(pred, true_fun, false_fun, *operands, operand=_NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, traced once each.

    ``pred`` must be a scalar (bool or number; nonzero is true). Both branches must return the
    same pytree of shapes and dtypes; a mismatch names ``true_fun``/``false_fun`` and the path.
    ``operand=`` passes a single operand by keyword, as JAX allows.
    """
    operands = _keyword_operand("cond", operands, operand)
    for label, fun in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(fun):
            raise TypeError(
                f"cond: {label} must be callable, got {fun!r:.40} (of type "
                f"{type(fun).__name__}); call cond(pred, true_fun, false_fun, "
                "*operands)"
            )
    p = as_operand(pred, "cond predicate")
    if p.shape != ():
        raise TypeError(
            f"cond: the predicate must be a scalar, got shape {p.shape}; use "
            "fungrad.numpy.where for elementwise selection"
        )
    from fungrad import lax

    if p.dtype != np.bool_:
        p = lax.ne(p, lax.full((), 0, p.dtype))
    index = lax.convert_element_type(p, np.int32)
    # branches are [false, true] (index 0 is false); messages compare against true_fun, as JAX
    return _switch("cond", index, [false_fun, true_fun], ["false_fun", "true_fun"], 1, operands)


# -- rules ---------------------------------------------------------------------------------------


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    op_tangents = tangents[1:]
    nonzeros = [type(t) is not Zero for t in op_tangents]
    out_nz = [False] * len(branches[0].out_avals)
    for b in branches:
        _, nz = jvp_jaxpr(b, nonzeros, instantiate=False)
        out_nz = [a or c for a, c in zip(out_nz, nz)]
    new_branches = tuple(jvp_jaxpr(b, nonzeros, instantiate=out_nz)[0] for b in branches)
    nz_tangents = [t for t in op_tangents if type(t) is not Zero]
    outs = cond_p.bind(index, *ops, *nz_tangents, branches=new_branches)
    n = len(out_nz)
    primal_out, tangent_it = outs[:n], iter(outs[n:])
    tangent_out = [
        next(tangent_it) if nz else Zero(tangent_aval(a))
        for nz, a in zip(out_nz, branches[0].out_avals)
    ]
    return primal_out, tangent_out


def _cond_transpose(cts, index, *ops, branches):
    if is_undefined_primal(index):
        raise TypeError("cond: the branch index cannot be a linear input")
    linear = [is_undefined_primal(x) for x in ops]
    res = [x for x, lin in zip(ops, linear) if not lin]
    ct_avals = [tangent_aval(a) for a in branches[0].out_avals]
    cts = [instantiate_zeros(ct) if type(ct) is Zero else ct for ct in cts]

    def transposed(branch):
        def f(*args):
            r, c = iter(args[: len(res)]), args[len(res) :]
            primal_args = [UndefPrimal(x.aval) if lin else next(r) for x, lin in zip(ops, linear)]
            ct_ins = backward_pass(branch.jaxpr, branch.consts, primal_args, list(c))
            return [instantiate_zeros(ct) for ct, lin in zip(ct_ins, linear) if lin]

        return trace_to_jaxpr(f, [core.get_aval(x) for x in res] + ct_avals)

    new_branches = tuple(transposed(b) for b in branches)
    outs = iter(cond_p.bind(index, *res, *cts, branches=new_branches))
    return [None] + [next(outs) if lin else None for lin in linear]


def _cond_batch(axis_size, args, dims, *, branches):
    index, ops = args[0], args[1:]
    idx_dim, op_dims = dims[0], dims[1:]
    if idx_dim is not None:
        # A batched index: every branch runs on the whole batch, then each example selects its
        # branch's result (JAX turns cond into select the same way).
        from fungrad import lax

        ops0 = [bdim_at_front(x, d, axis_size) for x, d in zip(ops, op_dims)]
        results = []
        for b in branches:
            bj, _ = batch_jaxpr(b, axis_size, [True] * len(ops), instantiate=True)
            results.append(eval_closed(bj, *ops0))
        idx = moveaxis(index, idx_dim, 0)
        idx = lax.clamp(np.int32(0), idx, np.int32(len(branches) - 1))
        outs = []
        for k in range(len(results[0])):
            cases = [r[k] for r in results]
            shape = core.get_aval(cases[0]).shape
            which = lax.broadcast_in_dim(idx, shape, (0,))
            outs.append(lax.select_n(which, *cases))
        return outs, [0] * len(outs)
    batched = [d is not None for d in op_dims]
    ops0 = [x if d is None else moveaxis(x, d, 0) for x, d in zip(ops, op_dims)]
    out_b = [False] * len(branches[0].out_avals)
    for b in branches:
        _, ob = batch_jaxpr(b, axis_size, batched, instantiate=False)
        out_b = [a or c for a, c in zip(out_b, ob)]
    new_branches = tuple(batch_jaxpr(b, axis_size, batched, instantiate=out_b)[0] for b in branches)
    outs = cond_p.bind(index, *ops0, branches=new_branches)
    return outs, [0 if b else None for b in out_b]


jvp_rules[cond_p] = _cond_jvp
transpose_rules[cond_p] = _cond_transpose
batch_rules[cond_p] = _cond_batch


def _cond_partial_eval(trace, args, params):
    """Split a cond with some unknown operands (inside linearize) into a known cond, run now,
    that computes the known outputs and every branch's residuals, and an unknown cond, staged,
    that reads them. Branch ``i`` outputs zeros for the other branches' residual slots."""
    from fungrad.transforms.partial_eval import partial_eval_jaxpr

    branches = params["branches"]
    index, ops = args[0], args[1:]
    if trace.is_unknown(index):
        return trace.stage(cond_p, args, params)
    ops_uk = [trace.is_unknown(x) for x in ops]
    n_out = len(branches[0].out_avals)
    out_uk = [False] * n_out
    for b in branches:
        _, _, uk, _ = partial_eval_jaxpr(b, ops_uk, instantiate=False)
        out_uk = [a or c for a, c in zip(out_uk, uk)]
    splits = [partial_eval_jaxpr(b, ops_uk, instantiate=out_uk) for b in branches]
    res_avals = [list(k.out_avals[len(k.out_avals) - n :]) for k, _, _, n in splits]
    all_res = [a for avals in res_avals for a in avals]
    known_ops = [x for x, u in zip(ops, ops_uk) if not u]
    unknown_ops = [x for x, u in zip(ops, ops_uk) if u]
    from fungrad import lax

    def known_branch(i):
        known_j, _, _, n_res = splits[i]

        def f(*xs):
            outs = eval_closed(known_j, *xs)
            before = [a for avals in res_avals[:i] for a in avals]
            after = [a for avals in res_avals[i + 1 :] for a in avals]
            zeros = [lax.full(a.shape, 0, a.dtype) for a in before]
            zeros_after = [lax.full(a.shape, 0, a.dtype) for a in after]
            return outs[: len(outs) - n_res] + zeros + outs[len(outs) - n_res :] + zeros_after

        return trace_to_jaxpr(f, [core.get_aval(x) for x in known_ops])

    def unknown_branch(i):
        _, unknown_j, _, n_res = splits[i]
        start = sum(len(r) for r in res_avals[:i])

        def f(*xs):
            res, rest = xs[: len(all_res)], xs[len(all_res) :]
            return eval_closed(unknown_j, *res[start : start + n_res], *rest)

        return trace_to_jaxpr(f, all_res + [core.get_aval(x) for x in unknown_ops])

    with core.set_current_trace(trace.parent):
        known_out = cond_p.bind(
            index, *known_ops, branches=tuple(known_branch(i) for i in range(len(branches)))
        )
    n_known = n_out - sum(out_uk)
    residuals = known_out[n_known:]
    unknown_out = trace.stage(
        cond_p,
        [index, *residuals, *unknown_ops],
        dict(branches=tuple(unknown_branch(i) for i in range(len(branches)))),
    )
    k_it, u_it = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u_it) if u else next(k_it) for u in out_uk]


partial_eval_rules[cond_p] = _cond_partial_eval


# -- lowering (fungrad/lowering/control_flow.py: a switch over natively compiled branches) -----


def _cond_lowering(ctx, index, *ops, branches):
    return control_flow_lowering.lower_cond(ctx, index, ops, branches)


kernel.register_lowering(cond_p, _cond_lowering)
