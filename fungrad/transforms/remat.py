"""Rematerialisation: ``checkpoint`` (= ``remat``) trades memory for recomputation.

``checkpoint(f)`` binds the ``checkpoint`` primitive around ``f``'s jaxpr. Evaluated, jvp'd or
batched it behaves like ``f``. What changes is reverse mode: when linearize splits the jvp'd
checkpoint into a known (primal) and an unknown (tangent) part, a *policy* decides which known
intermediates are saved as residuals; the others are recomputed inside the unknown part, which
stays a ``checkpoint`` equation of the linear jaxpr. Transposing it evaluates the recomputation
forward, then runs the backward pass.

Policies (``fungrad.checkpoint_policies``), called as ``policy(primitive, *avals, **params)``
and returning whether that equation's output may be saved (truthy; ``Recompute`` is falsy):
``nothing_saveable`` (the default: save only the inputs), ``everything_saveable`` (no
rematerialisation), ``dots_saveable`` / ``checkpoint_dots`` (save matmul outputs),
``dots_with_no_batch_dims_saveable`` / ``checkpoint_dots_with_no_batch_dims``, and for values
named with ``fungrad.ad_checkpoint.checkpoint_name`` (the ``name`` primitive):
``save_only_these_names``, ``save_any_names_but_these``, ``save_anything_except_these_names``;
``save_from_both_policies`` saves what either of two policies saves.

NB: JAX's offloading policies (``save_and_offload_only_these_names``,
``offload_dot_with_no_batch_dims``) move residuals to another memory space; fungrad has one
memory per backend, so an offloaded value is simply saved.
"""

from __future__ import annotations

import functools
import types

from fungrad import core, tree_util
from fungrad.core import set_current_trace
from fungrad.transforms.api_util import check_callable
from fungrad.transforms.jvp import jvp_jaxpr, jvp_rules
from fungrad.transforms.partial_eval import partial_eval_rules
from fungrad.transforms.transpose import backward_pass, transpose_rules
from fungrad.transforms.vmap import batch_jaxpr, batch_rules


def _everything_saveable(prim, *avals, **params):
    return True


def _nothing_saveable(prim, *avals, **params):
    return False


def _dots_saveable(prim, *avals, **params):
    return prim.name in ("dot_general", "conv_general_dilated")


def _dots_with_no_batch_dims_saveable(prim, *avals, **params):
    if prim.name != "dot_general":
        return False
    (_, (lhs_batch, _)) = params["dimension_numbers"]
    return not lhs_batch


def _names(fun: str, names) -> frozenset:
    for n in names:
        if not isinstance(n, str):
            raise TypeError(
                f"checkpoint_policies.{fun}: names must be strings (the names given "
                f"to checkpoint_name), got {n!r}"
            )
    return frozenset(names)


def save_only_these_names(*names_which_can_be_saved):
    """A policy saving only the values named (``checkpoint_name``) with one of these names."""
    names = _names("save_only_these_names", names_which_can_be_saved)

    def policy(prim, *avals, **params):
        return prim.name == "name" and params["name"] in names

    return policy


def save_any_names_but_these(*names_not_to_save):
    """A policy saving every named value except those with one of these names; unnamed values
    are recomputed."""
    names = _names("save_any_names_but_these", names_not_to_save)

    def policy(prim, *avals, **params):
        return prim.name == "name" and params["name"] not in names

    return policy


def save_anything_except_these_names(*names_not_to_save):
    """A policy saving every value except those named with one of these names."""
    names = _names("save_anything_except_these_names", names_not_to_save)

    def policy(prim, *avals, **params):
        return prim.name != "name" or params["name"] not in names

    return policy


def save_from_both_policies(policy_1, policy_2):
    """A policy saving what either ``policy_1`` or ``policy_2`` saves."""
    for p in (policy_1, policy_2):
        check_callable(
            p,
            "checkpoint_policies.save_from_both_policies",
            "pass two policies, e.g. (dots_saveable, save_only_these_names('h'))",
        )

    def policy(prim, *avals, **params):
        return bool(policy_1(prim, *avals, **params)) or bool(policy_2(prim, *avals, **params))

    return policy


def save_and_offload_only_these_names(
    *,
    names_which_can_be_saved,
    names_which_can_be_offloaded,
    offload_src="device",
    offload_dst="pinned_host",
):
    """JAX's offloading policy: values with the names of either list are saved (fungrad has
    one memory, so offloading is saving); the others are recomputed."""
    names = _names("save_and_offload_only_these_names", names_which_can_be_saved) | _names(
        "save_and_offload_only_these_names", names_which_can_be_offloaded
    )
    return save_only_these_names(*names)


def offload_dot_with_no_batch_dims(offload_src="device", offload_dst="pinned_host"):
    """JAX's offloading ``dots_with_no_batch_dims_saveable``: fungrad saves those products."""
    return _dots_with_no_batch_dims_saveable


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_everything_saveable,
    nothing_saveable=_nothing_saveable,
    dots_saveable=_dots_saveable,
    checkpoint_dots=_dots_saveable,
    dots_with_no_batch_dims_saveable=_dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=_dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
)


def _checkpoint_impl(*args, jaxpr, prevent_cse, differentiated, policy):
    return core.eval_closed_jaxpr_impl(jaxpr, *args)


def _checkpoint_abstract_eval(*avals, jaxpr, prevent_cse, differentiated, policy):
    return jaxpr.out_avals


checkpoint_p = core.Primitive("checkpoint", multiple_results=True)
checkpoint_p.impl = _checkpoint_impl
checkpoint_p.abstract_eval = _checkpoint_abstract_eval


def _checkpoint_jvp(primals, tangents, *, jaxpr, prevent_cse, differentiated, policy):
    from fungrad.transforms.jvp import Zero, tangent_aval

    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_j, out_nz = jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    outs = checkpoint_p.bind(
        *primals,
        *[t for t in tangents if type(t) is not Zero],
        jaxpr=jvp_j,
        prevent_cse=prevent_cse,
        differentiated=True,
        policy=policy,
    )
    n = len(jaxpr.out_avals)
    t_it = iter(outs[n:])
    return outs[:n], [
        next(t_it) if nz else Zero(tangent_aval(a)) for nz, a in zip(out_nz, jaxpr.out_avals)
    ]


def _checkpoint_batch(axis_size, args, dims, *, jaxpr, prevent_cse, differentiated, policy):
    from fungrad.transforms.vmap import moveaxis

    batched = [d is not None for d in dims]
    new_j, out_b = batch_jaxpr(jaxpr, axis_size, batched, instantiate=False)
    vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(args, dims)]
    outs = checkpoint_p.bind(
        *vals, jaxpr=new_j, prevent_cse=prevent_cse, differentiated=differentiated, policy=policy
    )
    return outs, [0 if b else None for b in out_b]


def _checkpoint_transpose(cts, *args, jaxpr, prevent_cse, differentiated, policy):
    # backward_pass evaluates the equations that read only known values (the recomputation)
    # forward, then transposes the linear ones.
    return backward_pass(jaxpr.jaxpr, jaxpr.consts, list(args), list(cts))


def _checkpoint_partial_eval(trace, args, params):
    jaxpr, policy = params["jaxpr"], params["policy"]
    unknown = [trace.is_unknown(a) for a in args]
    known_j, unknown_j, out_uk, residual_vars = _partial_eval_with_policy(jaxpr, unknown, policy)
    known_args = [a for a, u in zip(args, unknown) if not u]
    with set_current_trace(trace.parent):
        known_out = core.eval_jaxpr(known_j.jaxpr, known_j.consts, *known_args)
    n_res = len(residual_vars)
    residuals = known_out[len(known_out) - n_res :]
    known_out = known_out[: len(known_out) - n_res]
    u_args = [*residuals, *[a for a, u in zip(args, unknown) if u]]
    unknown_out = trace.stage(checkpoint_p, u_args, dict(params, jaxpr=unknown_j))
    k_it, u_it = iter(known_out), iter(unknown_out)
    return [next(u_it) if u else next(k_it) for u in out_uk]


def _partial_eval_with_policy(closed: core.ClosedJaxpr, in_unknowns, policy):
    """Split ``closed`` into known and unknown jaxprs, saving as residuals only the known values
    that are inputs or outputs of equations ``policy`` allows; every other known value the
    unknown side needs is recomputed there. Returns ``(known, unknown, out_unknowns,
    residual_vars)``; ``unknown`` takes ``(*residuals, *unknown inputs)``."""
    j = closed.jaxpr
    unknown_vars = {v for v, u in zip(j.invars, in_unknowns) if u}
    producer: dict[core.Var, core.JaxprEqn] = {}
    known_eqns, unknown_eqns = [], []
    for eqn in j.eqns:
        if any(type(x) is core.Var and x in unknown_vars for x in eqn.invars):
            unknown_vars.update(eqn.outvars)
            unknown_eqns.append(eqn)
        else:
            known_eqns.append(eqn)
            for v in eqn.outvars:
                producer[v] = eqn
    out_unknowns = [type(v) is core.Var and v in unknown_vars for v in j.outvars]

    def saveable(eqn):
        return bool(policy(eqn.primitive, *[x.aval for x in eqn.invars], **eqn.params))

    residuals: list[core.Var] = []
    recompute: set[int] = set()
    seen: set[core.Var] = set()

    def need(root):
        # depth first, first operand first, from an explicit stack (a chain of thousands of
        # known equations must not nest a Python frame per equation)
        stack = [root]
        while stack:
            v = stack.pop()
            if type(v) is not core.Var or v in unknown_vars or v in seen:
                continue
            seen.add(v)
            eqn = producer.get(v)
            if eqn is None or saveable(eqn):
                residuals.append(v)  # an input, a const, or a value the policy saves
                continue
            recompute.add(id(eqn))
            stack.extend(reversed(eqn.invars))

    for eqn in unknown_eqns:
        for x in eqn.invars:
            need(x)
    for v, u in zip(j.outvars, out_unknowns):
        if u:
            need(v)
    known_outs = [v for v, u in zip(j.outvars, out_unknowns) if not u]
    known = core.ClosedJaxpr(
        core.Jaxpr(
            j.constvars,
            [v for v, u in zip(j.invars, in_unknowns) if not u],
            known_eqns,
            known_outs + residuals,
        ),
        closed.consts,
    )
    position = {id(e): i for i, e in enumerate(j.eqns)}
    body = sorted(
        [e for e in known_eqns if id(e) in recompute] + unknown_eqns, key=lambda e: position[id(e)]
    )
    res_in = [core.Var(v.aval) for v in residuals]
    rename = dict(zip(residuals, res_in))

    def rn(x):
        return rename.get(x, x) if type(x) is core.Var else x

    body = [
        core.JaxprEqn(e.primitive, [rn(x) for x in e.invars], e.params, e.outvars, e.source_info)
        for e in body
    ]
    unknown = core.ClosedJaxpr(
        core.Jaxpr(
            [],
            res_in + [v for v, u in zip(j.invars, in_unknowns) if u],
            body,
            [rn(v) for v, u in zip(j.outvars, out_unknowns) if u],
        ),
        [],
    )
    return known, unknown, out_unknowns, residuals


jvp_rules[checkpoint_p] = _checkpoint_jvp
batch_rules[checkpoint_p] = _checkpoint_batch
transpose_rules[checkpoint_p] = _checkpoint_transpose
partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval


def checkpoint(fun, prevent_cse: bool = True, policy=None, static_argnums=()):
    """``fun`` whose intermediates are recomputed in the backward pass instead of saved
    (``jax.checkpoint``). ``policy`` (see ``checkpoint_policies``) chooses what may be saved."""
    check_callable(
        fun, "checkpoint", "pass the function to rematerialise: checkpoint(f), or use @checkpoint"
    )
    if policy is not None and not callable(policy):
        raise TypeError(
            f"checkpoint: policy must be None or a callable "
            f"policy(primitive, *avals, **params) -> bool, such as "
            f"fungrad.checkpoint_policies.dots_saveable; got {policy!r} of type "
            f"{type(policy).__name__}"
        )
    policy = checkpoint_policies.nothing_saveable if policy is None else policy
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        from fungrad.transforms.autodiff import _as_array
        from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr

        static = {i: args[i] for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        leaves = [_as_array(x, "checkpoint") for x in leaves]
        out_box = []

        def flat_fun(*xs):
            d, kw = tree_util.tree_unflatten(in_tree, xs)
            it = iter(d)
            full = [static[i] if i in static else next(it) for i in range(len(args))]
            out = fun(*full, **kw)
            flat, tree = tree_util.tree_flatten(out)
            out_box.append(tree)
            return [_as_array(o, "checkpoint output") for o in flat]

        closed = trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in leaves])
        closed, hoisted = hoist_tracer_consts(closed)
        outs = checkpoint_p.bind(
            *hoisted,
            *leaves,
            jaxpr=closed,
            prevent_cse=prevent_cse,
            differentiated=False,
            policy=policy,
        )
        return tree_util.tree_unflatten(out_box[0], outs)

    return remat_f


remat = checkpoint
