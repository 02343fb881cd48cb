"""The checkify interpreter: evaluate a jaxpr, threading an Error value through it.

:func:`checkify_jaxpr` binds each equation under the current trace, as ``eval_jaxpr`` does,
so the error arrays it computes are ordinary values of whatever transform is running
(``jit``, ``vmap``, ``grad`` around ``checkify`` see plain array operations). An equation
whose primitive has a rule in :data:`error_checks` is handed to it instead; a rule returns
the updated error and the equation's outputs:

* ``check`` (the user's checks) is discharged: its error merged into the threaded one when
  its kind is enabled, dropped otherwise (JAX drops it too);
* the primitives that can make a NaN add a NaN check of their outputs (``nan_checks``),
  ``div`` a zero-divisor check (``div_checks``), gather/scatter/dynamic slices an
  out-of-bounds check of their indices (``index_checks``), with JAX's payloads;
* primitives with bodies (``cond``, ``scan``, ``while``, ``jit``, ``checkpoint``,
  ``custom_jvp_call``, ``custom_vjp_call``) have their bodies checkified: the error's leaves
  become extra operands, carries and outputs. A body may add error kinds the error lacks;
  the error is first given a placeholder slot for each (:meth:`Error._add_placeholder_effects`)
  so that branches and loop carries keep one structure.
"""

from __future__ import annotations

import sys

import numpy as np

from fungrad import core, lax, source_info, tree_util
from fungrad import numpy as fnp
from fungrad.array import Array
from fungrad.experimental.checkify_error import (
    DivisionByZeroError,
    Error,
    NaNError,
    OOBError,
    assert_func,
    update_error,
)
from fungrad.experimental.checkify_primitive import check_p
from fungrad.lax.control_flow.conditionals import cond_p
from fungrad.lax.control_flow.loops import scan_p, while_p
from fungrad.transforms import staging
from fungrad.transforms.custom import custom_jvp_call_p, custom_vjp_call_p
from fungrad.transforms.jit_primitive import jit_p
from fungrad.transforms.jvp import Zero, tangent_aval
from fungrad.transforms.remat import checkpoint_p

__all__ = ["checkify_jaxpr", "error_checks"]

error_checks: dict = {}
"""primitive -> ``rule(error, enabled_errors, source, *invals, **params) -> (error, outs)``."""


def checkify_jaxpr(jaxpr: core.Jaxpr, consts, enabled_errors, error: Error, *args):
    """Evaluate ``jaxpr`` on ``consts`` and ``args`` with the checks of ``enabled_errors``;
    returns ``(error, outputs)``."""
    env: dict = {}

    def read(v):
        if type(v) is core.Literal:
            return Array(v.val, v.aval.weak_type)
        return env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    state = source_info._state
    prev = source_info.set_equation_source(sys._getframe(), state.info)
    outer = prev[1]
    try:
        for eqn in jaxpr.eqns:
            src = state.info = eqn.source_info or outer
            invals = map(read, eqn.invars)
            rule = error_checks.get(eqn.primitive)
            if rule is None:
                out = eqn.primitive.bind(*invals, **eqn.params)
            else:
                error, out = rule(error, enabled_errors, src, *invals, **eqn.params)
            if eqn.primitive.multiple_results:
                env.update(zip(eqn.outvars, out))
            else:
                env[eqn.outvars[0]] = out
    finally:
        source_info.restore(prev)
    return error, [read(v) for v in jaxpr.outvars]


# -- checkified bodies -----------------------------------------------------------------------------


class _Checked:
    """A body traced with the error threaded through it: ``jaxpr`` takes the body's
    operands with the error's leaves inserted at ``err_pos`` and returns the error's leaves,
    then the body's outputs; ``out_tree`` rebuilds the output error (its kinds and metadata)."""

    def __init__(self, jaxpr: core.ClosedJaxpr, out_tree, num_err_out: int):
        self.jaxpr = jaxpr
        self.out_tree = out_tree
        self.num_err_out = num_err_out

    @property
    def effects(self) -> set:
        return set(self.out_error(self.jaxpr.out_avals[: self.num_err_out])._pred)

    def out_error(self, leaves) -> Error:
        return tree_util.tree_unflatten(self.out_tree, leaves)


def trace_checked(fun, error: Error, arg_avals, err_pos: int, what: str) -> _Checked:
    """Trace ``fun(error, *args) -> (error, outs)`` with the error's leaves as operands."""
    err_leaves, err_tree = tree_util.tree_flatten(error)
    ne = len(err_leaves)
    err_avals = [core.get_aval(x).strip_weak_type() for x in err_leaves]
    in_avals = [*arg_avals[:err_pos], *err_avals, *arg_avals[err_pos:]]
    box = []

    def flat_fun(*flat):
        err = tree_util.tree_unflatten(err_tree, flat[err_pos : err_pos + ne])
        err, outs = fun(err, *flat[:err_pos], *flat[err_pos + ne :])
        leaves, tree = tree_util.tree_flatten(err)
        box.append((tree, len(leaves)))
        return [*leaves, *outs]

    closed = staging.trace_to_jaxpr(flat_fun, in_avals)
    closed, hoisted = staging.hoist_tracer_consts(closed)
    if hoisted:
        raise AssertionError(
            f"checkify: the {what} body closes over values of an enclosing transform; "
            "bodies reach such values only through their operands"
        )
    tree, n_out = box[0]
    return _Checked(closed, tree, n_out)


def _with_slots_for(error: Error, trace):
    """``(error, trace(error))`` where the traced body's output error has the same kinds as
    its input: when a first trace shows the body adding kinds, the error gets placeholder
    slots for them and the body is traced again. ``trace`` returns one :class:`_Checked` or a
    list of them (a cond's branches)."""
    first = trace(error)
    effects = set().union(*(c.effects for c in (first if isinstance(first, list) else [first])))
    if effects <= set(error._pred):
        return error, first
    error = error._add_placeholder_effects(effects)
    return error, trace(error)


def _interpret(closed: core.ClosedJaxpr, enabled):
    return lambda err, *args: checkify_jaxpr(closed.jaxpr, closed.consts, enabled, err, *args)


def _merged_metadata(checked) -> dict:
    merged: dict = {}
    for c in checked:
        merged.update(c.out_error(c.jaxpr.out_avals[: c.num_err_out])._metadata)
    return merged


def _leaves(error: Error) -> list:
    return tree_util.tree_leaves(error)


# -- discharging the user's checks -----------------------------------------------------------------


def _check_discharge(error, enabled, src, *args, err_tree, debug):
    del src, debug
    new = tree_util.tree_unflatten(err_tree, args)
    for effect, pred in new._pred.items():
        if effect.error_type in enabled:
            error = update_error(error, pred, new._code[effect], {}, new._payload[effect], effect)
    return error._replace(_metadata={**new._metadata, **error._metadata}), []


error_checks[check_p] = _check_discharge


# -- automatic checks ------------------------------------------------------------------------------

NAN_PRIMITIVES = (
    "acos acosh add asin asinh atan2 atan atanh bessel_i0e bessel_i1e cbrt "
    "conv_general_dilated cos cosh cumlogsumexp cummax cummin cumprod cumsum digamma "
    "dot_general erf_inv erf erfc exp expm1 fft igamma_grad_a igamma igammac integer_pow "
    "lgamma linear_solve log1p log logistic mul pad pow psum reduce reduce_prod reduce_sum "
    "reduce_window reduce_window_sum regularized_incomplete_beta rem rng_uniform rsqrt sin "
    "sinh sqrt sub tan tanh"
).split()
"""JAX's ``checkify.nan_primitives``: the primitives whose outputs checkify tests for NaN."""


def _any_nan(outs):
    flags = [fnp.any(fnp.isnan(x)) for x in outs if fnp.issubdtype(x.dtype, np.inexact)]
    if not flags:
        return None
    return flags[0] if len(flags) == 1 else fnp.any(fnp.stack(flags))


def check_nans(prim, error, enabled, src, out):
    """``error`` with a check that ``out`` (one value or a list) holds no NaN."""
    if NaNError not in enabled:
        return error
    any_nan = _any_nan(out if prim.multiple_results else [out])
    if any_nan is None:
        return error
    return assert_func(error, any_nan, NaNError, (prim.name,), src)


def _nan_rule(prim):
    def rule(error, enabled, src, *invals, **params):
        out = prim.bind(*invals, **params)
        return check_nans(prim, error, enabled, src, out), out

    return rule


for _name in NAN_PRIMITIVES:
    if _name in core.primitives:
        error_checks[core.primitives[_name]] = _nan_rule(core.primitives[_name])


def _div_rule(error, enabled, src, x, y):
    if DivisionByZeroError in enabled:
        error = assert_func(error, fnp.any(fnp.equal(y, 0)), DivisionByZeroError, (), src)
    div_p = core.primitives["div"]
    out = div_p.bind(x, y)
    return check_nans(div_p, error, enabled, src, out), out


error_checks[core.primitives["div"]] = _div_rule


def oob_payload(oob_mask, indices, dims_map, operand_shape):
    """``[index, axis, axis size]`` of the first out-of-bounds index (JAX's payload)."""
    flat_idx = fnp.argmin(fnp.logical_not(oob_mask))
    last = flat_idx % np.shape(indices)[-1] if np.ndim(indices) else 0
    oob_axis = fnp.asarray(np.asarray(dims_map, np.int32))[last]
    oob_axis_size = fnp.asarray(np.asarray(operand_shape, np.int32))[oob_axis]
    oob_index = fnp.ravel(indices)[flat_idx]
    return fnp.stack(
        [fnp.asarray(v).astype(np.int32) for v in (oob_index, oob_axis, oob_axis_size)]
    )


def _assert_oob(error, src, oob_mask, indices, dims_map, prim_name, operand_shape):
    if np.size(oob_mask) == 0:
        return error
    payload = oob_payload(oob_mask, indices, dims_map, operand_shape)
    static = (prim_name, tuple(operand_shape))
    return assert_func(error, fnp.any(oob_mask), OOBError, static, src, [payload])


def _dynamic_slice_rule(error, enabled, src, operand, *starts, slice_sizes):
    out = lax.dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    if OOBError not in enabled or not starts:
        return error, out
    starts = fnp.stack(list(starts))
    dims = np.array(np.shape(operand), dtype=starts.dtype)
    oob = (starts < 0) | (starts + np.array(slice_sizes, dtype=starts.dtype) > dims)
    shape = np.shape(operand)
    error = _assert_oob(error, src, oob, starts, range(len(shape)), "dynamic_slice", shape)
    return error, out


def _dynamic_update_slice_rule(error, enabled, src, operand, update, *starts):
    out = lax.dynamic_update_slice_p.bind(operand, update, *starts)
    if OOBError not in enabled or not starts:
        return error, out
    starts = fnp.stack(list(starts))
    dims = np.array(np.shape(operand), dtype=starts.dtype)
    oob = (starts < 0) | (starts + np.array(np.shape(update), dtype=starts.dtype) > dims)
    shape = np.shape(operand)
    error = _assert_oob(error, src, oob, starts, range(len(shape)), "dynamic_update_slice", shape)
    return error, out


def _gather_rule(error, enabled, src, operand, indices, **params):
    out = lax.gather_p.bind(operand, indices, **params)
    if OOBError not in enabled:
        return error, out
    dnums, slice_sizes = params["dimension_numbers"], params["slice_sizes"]
    index_map = np.array(dnums.start_index_map, dtype=int)
    upper = np.array(np.shape(operand))[index_map] - np.array(slice_sizes)[index_map]
    oob = (indices < 0) | (indices > upper.astype(indices.dtype))
    shape = np.shape(operand)
    return _assert_oob(error, src, oob, indices, dnums.start_index_map, "gather", shape), out


error_checks[lax.dynamic_slice_p] = _dynamic_slice_rule
error_checks[lax.dynamic_update_slice_p] = _dynamic_update_slice_rule
error_checks[lax.gather_p] = _gather_rule


def _scatter_rule(prim):
    def rule(error, enabled, src, operand, indices, updates, **params):
        out = prim.bind(operand, indices, updates, **params)
        if OOBError not in enabled:
            return error, out
        dnums = params["dimension_numbers"]
        shape = np.shape(operand)
        window = iter(dnums.update_window_dims)
        sizes = [
            1
            if i in dnums.inserted_window_dims or i in dnums.operand_batching_dims
            else np.shape(updates)[next(window)]
            for i in range(len(shape))
        ]
        upper = np.array([shape[i] - sizes[i] for i in dnums.scatter_dims_to_operand_dims])
        upper = np.minimum(upper, np.iinfo(indices.dtype).max).astype(indices.dtype)
        oob = (indices < 0) | (indices > upper)
        dims_map = dnums.scatter_dims_to_operand_dims
        error = _assert_oob(error, src, oob, indices, dims_map, prim.name, shape)
        return check_nans(prim, error, enabled, src, out), out

    return rule


for _name in ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"):
    error_checks[core.primitives[_name]] = _scatter_rule(core.primitives[_name])


# -- primitives with bodies ------------------------------------------------------------------------


def _cond_rule(error, enabled, src, index, *ops, branches):
    avals = branches[0].in_avals

    def checked(err):
        return [trace_checked(_interpret(b, enabled), err, avals, 0, "cond") for b in branches]

    error, new = _with_slots_for(error, checked)
    outs = cond_p.bind(index, *_leaves(error), *ops, branches=tuple(c.jaxpr for c in new))
    ne = new[0].num_err_out
    out_err = new[0].out_error(outs[:ne])._replace(_metadata=_merged_metadata(new))
    return out_err, outs[ne:]


error_checks[cond_p] = _cond_rule


def _scan_rule(error, enabled, src, *args, jaxpr, num_consts, num_carry, linear, **params):
    avals = jaxpr.in_avals

    def checked(err):
        return trace_checked(_interpret(jaxpr, enabled), err, avals, num_consts, "scan")

    error, new = _with_slots_for(error, checked)
    err_leaves = _leaves(error)
    ne = len(err_leaves)
    consts, rest = args[:num_consts], args[num_consts:]
    outs = scan_p.bind(
        *consts,
        *err_leaves,
        *rest,
        jaxpr=new.jaxpr,
        num_consts=num_consts,
        num_carry=num_carry + ne,
        linear=(*linear[:num_consts], *(False,) * ne, *linear[num_consts:]),
        **params,
    )
    return new.out_error(outs[:ne]), outs[ne:]


error_checks[scan_p] = _scan_rule


def _while_rule(error, enabled, src, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts = args[:cond_nconsts]
    bconsts = args[cond_nconsts : cond_nconsts + body_nconsts]
    carry = args[cond_nconsts + body_nconsts :]
    # The first test of the condition, before the loop.
    error, _ = checkify_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, enabled, error, *cconsts, *carry)
    nc, nb = cond_nconsts, body_nconsts
    cond_avals, body_avals = cond_jaxpr.in_avals, body_jaxpr.in_avals

    def body(err, *flat):  # (cond consts, body consts, carry): the body, then the next test
        cc, bc, c = flat[:nc], flat[nc : nc + nb], flat[nc + nb :]
        err, out = checkify_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, enabled, err, *bc, *c)
        err, _ = checkify_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, enabled, err, *cc, *out)
        return err, out

    def cond(err, *flat):  # the test, its error dropped (the body made it already)
        _, pred = checkify_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, enabled, err, *flat)
        return Error({}, {}, {}, {}), pred

    body_in = [*cond_avals[:nc], *body_avals]
    error, new_body = _with_slots_for(
        error, lambda err: trace_checked(body, err, body_in, nc + nb, "while_loop body")
    )
    new_cond = trace_checked(cond, error, cond_avals, nc, "while_loop cond")
    err_leaves = _leaves(error)
    ne = len(err_leaves)
    outs = while_p.bind(
        *cconsts,
        *cconsts,
        *bconsts,
        *err_leaves,
        *carry,
        cond_jaxpr=new_cond.jaxpr,
        body_jaxpr=new_body.jaxpr,
        cond_nconsts=nc,
        body_nconsts=nc + nb,
    )
    return new_body.out_error(outs[:ne]), outs[ne:]


error_checks[while_p] = _while_rule


def _call_rule(prim, key):
    """The rule of a call primitive whose body is the ClosedJaxpr param ``key``."""

    def rule(error, enabled, src, *args, **params):
        body = params[key]
        new = trace_checked(_interpret(body, enabled), error, body.in_avals, 0, prim.name)
        err_leaves = _leaves(error)
        outs = prim.bind(*err_leaves, *args, **{**params, key: new.jaxpr})
        ne = new.num_err_out
        return new.out_error(outs[:ne]), outs[ne:]

    return rule


error_checks[jit_p] = _call_rule(jit_p, "jaxpr")
error_checks[checkpoint_p] = _call_rule(checkpoint_p, "jaxpr")


def _custom_jvp_rule(error, enabled, src, *args, call_jaxpr, jvp, num_consts, symbolic_zeros):
    """The primal body checkified; the custom rule (run when differentiated) passes the
    error through unchanged, as in JAX."""

    def checked(err):
        return trace_checked(
            _interpret(call_jaxpr, enabled), err, call_jaxpr.in_avals, num_consts, "custom_jvp"
        )

    error, new = _with_slots_for(error, checked)
    err_leaves = _leaves(error)
    ne = len(err_leaves)

    def checked_jvp(primals, tangents):
        out, t_out = jvp(list(primals[ne:]), list(tangents[ne:]))
        err = list(primals[:ne])
        return [*err, *out], [*(Zero(tangent_aval(core.get_aval(e))) for e in err), *t_out]

    outs = custom_jvp_call_p.bind(
        *args[:num_consts],
        *err_leaves,
        *args[num_consts:],
        call_jaxpr=new.jaxpr,
        jvp=checked_jvp,
        num_consts=num_consts,
        symbolic_zeros=symbolic_zeros,
    )
    return new.out_error(outs[:ne]), outs[ne:]


def _custom_vjp_rule(error, enabled, src, *args, call_jaxpr, fwd, bwd, num_consts, out_avals):
    """The primal body checkified; fwd and bwd (run when differentiated) pass the error
    through unchanged, as in JAX."""

    def checked(err):
        return trace_checked(
            _interpret(call_jaxpr, enabled), err, call_jaxpr.in_avals, num_consts, "custom_vjp"
        )

    error, new = _with_slots_for(error, checked)
    err_leaves = _leaves(error)
    ne = len(err_leaves)

    def checked_fwd(xs, perturbed):
        out, res = fwd(list(xs[ne:]), list(perturbed[ne:]))
        return [*xs[:ne], *out], res

    def checked_bwd(res, cts):
        return [*(None,) * ne, *bwd(res, list(cts[ne:]))]

    err_avals = tuple(core.get_aval(e).strip_weak_type() for e in err_leaves)
    outs = custom_vjp_call_p.bind(
        *args[:num_consts],
        *err_leaves,
        *args[num_consts:],
        call_jaxpr=new.jaxpr,
        fwd=checked_fwd,
        bwd=checked_bwd,
        num_consts=num_consts,
        out_avals=(*err_avals, *out_avals),
    )
    return new.out_error(outs[:ne]), outs[ne:]


error_checks[custom_jvp_call_p] = _custom_jvp_rule
error_checks[custom_vjp_call_p] = _custom_vjp_rule
