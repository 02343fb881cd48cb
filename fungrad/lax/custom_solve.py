"""Implicitly differentiated solvers: ``custom_root`` and ``custom_linear_solve`` (JAX's
``lax`` API), and the primitive ``linear_solve_p``.

``custom_linear_solve(matvec, b, solve, transpose_solve)`` returns ``solve(matvec, b)``, whose
derivatives never look inside ``solve`` (an iterative method, a factorisation...): for
``x = A^{-1} b`` with ``A`` the linear map ``matvec`` (which may close over traced values),

* forward mode: ``x_dot = A^{-1} (b_dot - A_dot x)``, a linear solve again (``A_dot x`` is the
  jvp of ``matvec`` with respect to the values it closes over, at fixed ``x``);
* reverse mode: the solve is linear in ``b``, and its transpose is ``transpose_solve(vecmat,
  ct)`` with ``vecmat`` the transpose of ``matvec`` (``solve`` itself with
  ``symmetric=True``).

It is one primitive, ``linear_solve``, whose operands are the closed-over values of the four
functions and ``b``, and whose params hold the four traced functions (``jaxprs``: matvec,
vecmat, solve, transpose_solve; vecmat and transpose_solve are None when no transpose_solve
is given). Its transpose swaps the roles (vecmat for matvec, transpose_solve for solve), so
second derivatives work too. Compiled, it is the ``solve`` jaxpr inlined.

``custom_root(f, initial_guess, solve, tangent_solve)`` returns ``solve(f, initial_guess)``
differentiated by the implicit function theorem at the root ``x*`` (``f(x*) = 0``): ``x*_dot =
-J^{-1} (df/dtheta . theta_dot)``, with ``J^{-1}`` applied by ``tangent_solve(g, y)`` where
``g`` is the linearisation of ``f`` at ``x*``. It is a ``custom_jvp`` function, so reverse
mode transposes ``tangent_solve``, which must therefore be linear in ``y`` (as in JAX).
"""

from __future__ import annotations

from fungrad import core, tree_util
from fungrad.core import get_aval
from fungrad.lowering import kernel
from fungrad.operands import array_leaf
from fungrad.transforms.jvp import Zero, instantiate_zeros, jvp_flat, jvp_rules, tangent_aval
from fungrad.transforms.transpose import UndefPrimal, transpose_rules
from fungrad.transforms.vmap import batch_jaxpr, batch_rules, moveaxis

__all__ = ["custom_root", "custom_linear_solve", "linear_solve_p"]


# -- tracing the user's functions ----------------------------------------------------------


def _trace(fname: str, what: str, fun, in_trees_avals):
    """Trace ``fun(*pytrees)`` at the flat avals of its argument pytrees. Returns
    ``(closed, consts, out_tree)``: the jaxpr takes ``(*consts, *flat_args)``, where
    ``consts`` are the traced values ``fun`` closes over."""
    from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr

    trees = [t for t, _ in in_trees_avals]
    sizes = [len(a) for _, a in in_trees_avals]
    avals = [a for _, av in in_trees_avals for a in av]
    out_tree = []

    def flat(*leaves):
        args, i = [], 0
        for t, n in zip(trees, sizes):
            args.append(tree_util.tree_unflatten(t, leaves[i : i + n]))
            i += n
        out = fun(*args)
        out_leaves, tree = tree_util.tree_flatten(out)
        out_tree.append(tree)
        return [array_leaf(o, f"{fname} {what}") for o in out_leaves]

    closed, consts = hoist_tracer_consts(trace_to_jaxpr(flat, avals))
    return closed, list(consts), out_tree[0]


def _check_tree(fname: str, what: str, got_tree, got_avals, want_tree, want_avals, has_aux: bool):
    if has_aux:
        if (
            got_tree.num_leaves == 0
            or got_tree.node_type is not tuple
            or len(got_tree.children) != 2
        ):
            raise TypeError(
                f"{fname}: with has_aux=True, {what} must return a pair "
                f"(solution, aux), got a {got_tree}"
            )
        got_tree = got_tree.children[0]
        got_avals = got_avals[: got_tree.num_leaves]
    if got_tree != want_tree:
        raise TypeError(
            f"{fname}: {what} must return the pytree structure of {want_tree}, got {got_tree}"
        )
    got = [a.strip_weak_type() for a in got_avals]
    want = [a.strip_weak_type() for a in want_avals]
    if [(a.shape, a.dtype) for a in got] != [(a.shape, a.dtype) for a in want]:
        raise TypeError(
            f"{fname}: {what} must return arrays of shapes and dtypes "
            f"{[a.str_short() for a in want]}, got {[a.str_short() for a in got]}"
        )


def _leaves_avals(fname: str, what: str, tree_value):
    leaves, tree = tree_util.tree_flatten(tree_value)
    leaves = [array_leaf(x, f"{fname} {what}") for x in leaves]
    return leaves, tree, [get_aval(x).strip_weak_type() for x in leaves]


# -- linear_solve_p ---------------------------------------------------------------------------


def _split(args, const_lengths):
    out, i = [], 0
    for n in const_lengths:
        out.append(list(args[i : i + n]))
        i += n
    return out, list(args[i:])


def _linear_solve_impl(*args, const_lengths, jaxprs):
    (_, _, sc, _), b = _split(args, const_lengths)
    return core.eval_closed_jaxpr_impl(jaxprs[2], *sc, *b)


def _linear_solve_abstract_eval(*avals, const_lengths, jaxprs):
    (_, _, _, _), b = _split(avals, const_lengths)
    outs = jaxprs[2].out_avals
    if [(a.shape, a.dtype) for a in outs[: len(b)]] != [(a.shape, a.dtype) for a in b]:
        raise TypeError(
            "linear_solve: the solve jaxpr's solution does not match b: "
            f"{[a.str_short() for a in outs[: len(b)]]} vs "
            f"{[a.str_short() for a in b]}"
        )
    return [a.strip_weak_type() for a in outs]


linear_solve_p = core.Primitive("linear_solve", multiple_results=True)
linear_solve_p.impl = _linear_solve_impl
linear_solve_p.abstract_eval = _linear_solve_abstract_eval


def _eval(closed, consts, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *consts, *args)


def _linear_solve_jvp(primals, tangents, *, const_lengths, jaxprs):
    (mc, _, _, _), b = _split(primals, const_lengths)
    (mc_dot, _, _, _), b_dot = _split(tangents, const_lengths)
    outs = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    n = len(b)
    x = outs[:n]
    zeros = [Zero(tangent_aval(get_aval(o))) for o in outs]
    rhs = list(b_dot)
    if any(type(t) is not Zero for t in mc_dot):
        # the change of the map at fixed x: jvp of matvec in the values it closes over
        _, a_dot_x = jvp_flat(lambda *c: _eval(jaxprs[0], c, *x), list(mc), list(mc_dot))
        from fungrad import lax

        rhs = [
            r if type(a) is Zero else (lax.neg(a) if type(r) is Zero else lax.sub(r, a))
            for r, a in zip(rhs, a_dot_x)
        ]
    if all(type(r) is Zero for r in rhs):
        return outs, zeros
    rhs = [instantiate_zeros(r) for r in rhs]
    consts = [c for group in _split(primals, const_lengths)[0] for c in group]
    x_dot = linear_solve_p.bind(*consts, *rhs, const_lengths=const_lengths, jaxprs=jaxprs)
    return outs, list(x_dot[:n]) + zeros[n:]


def _transposed(const_lengths, jaxprs):
    m, v, s, t = const_lengths
    mj, vj, sj, tj = jaxprs
    return (v, m, t, s), (vj, mj, tj, sj)


def _linear_solve_transpose(cts, *args, const_lengths, jaxprs):
    groups, b = _split(args, const_lengths)
    if any(type(c) is UndefPrimal for g in groups for c in g):
        raise TypeError(
            "custom_linear_solve: cannot transpose with respect to the values "
            "matvec/solve close over (the solve is linear in b only)"
        )
    n = len(b)
    ct_x = cts[:n]
    if all(type(c) is Zero for c in ct_x):
        return [None] * sum(const_lengths) + [Zero(a.aval) for a in b]
    if jaxprs[3] is None:
        raise TypeError(
            "custom_linear_solve: transpose_solve is required for reverse-mode "
            "differentiation (pass transpose_solve, or symmetric=True when the "
            "operator is symmetric)"
        )
    t_lengths, t_jaxprs = _transposed(const_lengths, jaxprs)
    m, v, s, t = groups
    outs = linear_solve_p.bind(
        *v,
        *m,
        *t,
        *s,
        *[instantiate_zeros(c) for c in ct_x],
        const_lengths=t_lengths,
        jaxprs=t_jaxprs,
    )
    return [None] * sum(const_lengths) + list(outs[:n])


def _linear_solve_batch(axis_size, args, dims, *, const_lengths, jaxprs):
    groups_d, b_d = _split(dims, const_lengths)
    groups, b = _split(args, const_lengths)
    new_jaxprs = []
    for j, gd in zip(jaxprs, groups_d):
        if j is None:
            new_jaxprs.append(None)
            continue
        in_b = [d is not None for d in gd] + [True] * (len(j.in_avals) - len(gd))
        new_jaxprs.append(batch_jaxpr(j, axis_size, in_b, instantiate=True)[0])
    consts = [
        c if d is None else moveaxis(c, d, 0)
        for g, gd in zip(groups, groups_d)
        for c, d in zip(g, gd)
    ]
    from fungrad.transforms.vmap import bdim_at_front

    bs = [bdim_at_front(x, d, axis_size) for x, d in zip(b, b_d)]
    outs = linear_solve_p.bind(*consts, *bs, const_lengths=const_lengths, jaxprs=tuple(new_jaxprs))
    return outs, [0] * len(outs)


def _linear_solve_lowering(ctx, *args, const_lengths, jaxprs):
    from fungrad.ir import passes

    (_, _, sc, _), b = _split(args, const_lengths)
    return ctx.planner.lower_jaxpr(passes.inline_calls(jaxprs[2]), [*sc, *b])


jvp_rules[linear_solve_p] = _linear_solve_jvp
transpose_rules[linear_solve_p] = _linear_solve_transpose
batch_rules[linear_solve_p] = _linear_solve_batch
kernel.register_lowering(linear_solve_p, _linear_solve_lowering)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False, has_aux=False):
    """``solve(matvec, b)``, differentiated implicitly (``jax.lax.custom_linear_solve``).

    ``matvec(x)`` is the linear map ``A`` (it may close over traced values, whose derivatives
    flow through ``x = A^{-1} b``); ``b`` is a pytree of arrays and ``solve(matvec, b)``
    returns ``x`` with the same structure (and ``(x, aux)`` with ``has_aux``).
    ``transpose_solve(vecmat, b)`` solves with the transposed map and is needed for reverse
    mode; ``symmetric=True`` uses ``solve`` for it. Forward mode needs neither.
    """
    from fungrad.transforms.autodiff import linear_transpose

    fname = "custom_linear_solve"
    for name, fn in (("matvec", matvec), ("solve", solve)):
        if not callable(fn):
            raise TypeError(f"{fname}: {name} must be callable, got {type(fn).__name__}")
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError(f"{fname}: transpose_solve must be callable or None")
    b_leaves, tree, avals = _leaves_avals(fname, "b", b)
    arg = [(tree, avals)]
    mv, mc, mv_tree = _trace(fname, "matvec", matvec, arg)
    _check_tree(fname, "matvec", mv_tree, mv.out_avals, tree, avals, False)
    sv, sc, sv_tree = _trace(fname, "solve", lambda y: solve(matvec, y), arg)
    _check_tree(fname, "solve", sv_tree, sv.out_avals, tree, avals, has_aux)
    if symmetric:
        transpose_solve = solve
    vm = tv = None
    vc: list = []
    tc: list = []
    if transpose_solve is not None:

        def vecmat(y):
            (out,) = linear_transpose(matvec, b)(y)
            return out

        vm, vc, _ = _trace(fname, "vecmat", vecmat, arg)
        tv, tc, tv_tree = _trace(
            fname, "transpose_solve", lambda y: transpose_solve(vecmat, y), arg
        )
        _check_tree(fname, "transpose_solve", tv_tree, tv.out_avals, tree, avals, has_aux)
    const_lengths = (len(mc), len(vc), len(sc), len(tc))
    outs = linear_solve_p.bind(
        *mc, *vc, *sc, *tc, *b_leaves, const_lengths=const_lengths, jaxprs=(mv, vm, sv, tv)
    )
    return tree_util.tree_unflatten(sv_tree, outs)


# -- custom_root ------------------------------------------------------------------------------


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """``solve(f, initial_guess)``, a root ``x*`` of ``f``, differentiated by the implicit
    function theorem (``jax.lax.custom_root``): derivatives with respect to the values ``f``
    closes over are ``-tangent_solve(g, df . dtheta)`` with ``g`` the linearisation of ``f``
    at ``x*``; ``solve`` is never differentiated. ``tangent_solve(g, y)`` solves ``g(x) = y``
    and must be linear in ``y`` for reverse mode, e.g. ``lambda g, y: y / g(1.0)`` for
    scalars. With ``has_aux``, ``solve`` returns ``(solution, aux)``; aux gets no derivative.
    """
    from fungrad.transforms.autodiff import linearize
    from fungrad.transforms.custom import custom_jvp

    fname = "custom_root"
    for name, fn in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        if not callable(fn):
            raise TypeError(f"{fname}: {name} must be callable, got {type(fn).__name__}")
    g_leaves, tree, avals = _leaves_avals(fname, "initial_guess", initial_guess)
    arg = [(tree, avals)]
    fj, fc, f_tree = _trace(fname, "f", f, arg)
    _check_tree(fname, "f", f_tree, fj.out_avals, tree, avals, False)
    sj, sc, s_tree = _trace(fname, "solve", lambda g: solve(f, g), arg)
    _check_tree(fname, "solve", s_tree, sj.out_avals, tree, avals, has_aux)

    def lin_and_solve(x, y):
        _, f_jvp = linearize(f, x)
        return tangent_solve(f_jvp, y)

    lj, lc, l_tree = _trace(fname, "tangent_solve", lin_and_solve, arg + arg)
    _check_tree(fname, "tangent_solve", l_tree, lj.out_avals, tree, avals, False)
    nf, ns, nl, n = len(fc), len(sc), len(lc), len(g_leaves)

    @custom_jvp
    def root(*args):
        return tuple(_eval(sj, args[nf : nf + ns], *args[nf + ns + nl :]))

    def root_jvp(primals, tangents):
        from fungrad import lax

        fcs, lcs = primals[:nf], primals[nf + ns : nf + ns + nl]
        out = root(*primals)
        x = list(out[:n])
        # the change of f at the root, holding x fixed, through the values it closes over
        _, rhs = jvp_flat(lambda *c: _eval(fj, c, *x), list(fcs), [t for t in tangents[:nf]])
        rhs = [instantiate_zeros(r) for r in rhs]
        x_dot = [lax.neg(v) for v in _eval(lj, lcs, *x, *rhs)]
        aux_dot = [lax.full(get_aval(a).shape, 0, get_aval(a).dtype) for a in out[n:]]
        return out, tuple(x_dot + aux_dot)

    root.defjvp(root_jvp)
    outs = root(*fc, *sc, *lc, *g_leaves)
    return tree_util.tree_unflatten(s_tree, list(outs))
