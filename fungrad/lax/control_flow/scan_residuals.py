"""Which residuals the forward scan of a linearized scan saves for the backward scan, and how.

Partial evaluation splits a scan body into a known part (run now, as the forward scan) and an
unknown part (staged; transposed, it is the backward scan). By default every value the unknown
part reads from the known part is a *residual* saved at every step: a ys output of the forward
scan, ``length`` times the value's size. Three kinds need less:

* a residual that depends only on the scan's constants (the weight of ``h @ W``; ``W.T``) is the
  same at every step: it is computed once, before the loop (:mod:`.loop_invariants`), and read
  by the backward scan as a constant;
* a residual that is a known xs leaf, or that the forward scan already returns as a ys output,
  is passed as that array instead of being stacked a second time;
* a residual that cheap arithmetic computes from other saved residuals (``1 - t`` beside ``t``,
  ``1 / (1 + e)`` and ``(1 + e) ** -2`` beside ``e``, as a sigmoid's derivative has them) is
  recomputed in the backward scan from those: a few flops per element instead of a stored
  array per step, which the backward kernels would otherwise read from memory.
"""

from __future__ import annotations

from fungrad import core
from fungrad.ir.passes import dce, has_effects
from fungrad.lax.control_flow.loop_invariants import hoist_loop_invariants


def known_scan_residuals(known_j, k_consts, k_xs, n_kcarry, n_kout, num_res):
    """Plan the forward scan of body ``known_j`` (invars: known consts, carries, xs; outvars:
    ``n_kout`` known outputs, then ``num_res`` residuals), evaluating the loop-invariant part
    now (in the current trace). Returns ``(res_src, res_vars, body, consts)``: ``body`` takes
    ``(*consts, *known carries, *known xs)`` and returns the known outputs and the residuals it
    stacks. ``res_src[i]`` is ``("const", value)`` for a loop-invariant residual (computed
    once), ``("xs", value)`` for a known xs leaf or ``("out", k)`` for output ``k`` of ``body``
    (a stacked residual, or a known ys output the residual repeats); ``res_vars[i]`` is the
    residual's variable in ``body`` (None for a constant one)."""
    n_kc = len(k_consts)
    movable = [False] * n_kout + [True] * num_res
    split = hoist_loop_invariants(known_j, n_kc, movable)
    res_src = []
    if split is None:
        consts = list(k_consts)
        res_src = [("out", n_kout + i) for i in range(num_res)]
    else:
        vals = core.eval_jaxpr(split.hoisted.jaxpr, split.hoisted.consts, *k_consts)
        consts = vals[: split.n_loop_consts]
        for kind, k in split.out_src[n_kout:]:
            if kind == "hoisted":
                res_src.append(("const", vals[split.n_loop_consts + k]))
            else:
                res_src.append(("out", k))
        known_j = split.loop
    # Stacked residuals that the forward scan already has stacked: known xs leaves and known
    # ys outputs are passed as they are instead of being saved a second time.
    j = known_j.jaxpr
    xs_invars = j.invars[len(consts) + n_kcarry :]
    xs_pos = {v: i for i, v in enumerate(xs_invars)}
    ys_pos: dict = {}
    for k in range(n_kcarry, n_kout):
        if type(j.outvars[k]) is core.Var:
            ys_pos.setdefault(j.outvars[k], k)
    keep_out = list(range(n_kout))
    new_src, res_vars = [], []
    for kind, val in res_src:
        if kind != "out":
            new_src.append((kind, val))
            res_vars.append(None)
            continue
        v = j.outvars[val]
        res_vars.append(v if type(v) is core.Var else None)
        if v in xs_pos:
            new_src.append(("xs", k_xs[xs_pos[v]]))
        elif v in ys_pos:
            new_src.append(("out", ys_pos[v]))
        else:
            new_src.append(("out", len(keep_out)))
            keep_out.append(val)
    if len(keep_out) != len(j.outvars):
        j = core.Jaxpr(j.constvars, j.invars, j.eqns, [j.outvars[k] for k in keep_out])
        known_j = core.ClosedJaxpr(j, known_j.consts)
    return new_src, res_vars, known_j, consts


_CHEAP = frozenset(
    {
        "neg",
        "add",
        "sub",
        "mul",
        "div",
        "integer_pow",
        "square",
        "abs",
        "sign",
        "max",
        "min",
        "select_n",
        "convert_element_type",
        "broadcast_in_dim",
        "reshape",
    }
)
"""Primitives cheap enough to recompute in the backward scan rather than save per step:
arithmetic without transcendental functions, and changes of layout that copy nothing."""

_MAX_RECOMPUTE = 4
"""The most equations the backward scan repeats to recompute one residual."""


def recompute_cheap_residuals(known_j, unknown_j, res_src, res_vars, n_kout):
    """Drop the stacked residuals that at most :data:`_MAX_RECOMPUTE` cheap equations
    (:data:`_CHEAP`) of the forward body ``known_j`` compute from residuals that are kept; the
    unknown body ``unknown_j`` (invars: the residuals, in ``res_src``'s order, then its own)
    recomputes them instead. Returns ``(res_src, known_j, unknown_j)`` without them."""
    j = known_j.jaxpr
    defs = {}
    for n, eqn in enumerate(j.eqns):
        for v in eqn.outvars:
            defs[v] = (n, eqn)
    # Decide in the order the forward body defines the residuals: a residual may be recomputed
    # only from residuals defined before it, which are then already known to be kept.
    kept: dict = {}  # body variable -> index of the kept residual holding it
    handled: set = set()
    chains: dict[int, list] = {}
    order = sorted(
        range(len(res_src)), key=lambda i: defs[res_vars[i]][0] if res_vars[i] in defs else -1
    )
    for i in order:
        v, (kind, val) = res_vars[i], res_src[i]
        if v is None or v in handled:
            continue
        handled.add(v)
        chain = None
        if kind == "out" and val >= n_kout:  # stacked for the backward scan alone
            chain = _chain(v, defs, kept)
        if chain is None:
            kept[v] = i
        else:
            chains[i] = chain
    if not chains:
        return res_src, known_j, unknown_j
    # The unknown body: the recomputation, then its own equations.
    u = unknown_j.jaxpr
    num_res = len(res_src)
    res_in = u.invars[:num_res]
    env = {v: res_in[i] for v, i in kept.items()}
    dropped_var = {res_vars[i]: res_in[i] for i in chains}
    eqns = []
    for i in sorted(chains, key=lambda i: defs[res_vars[i]][0]):
        for eqn in chains[i]:
            out = eqn.outvars[0]
            if out in env:
                continue
            new = dropped_var.get(out) or core.Var(out.aval)
            env[out] = new
            ins = [env[x] if type(x) is core.Var else x for x in eqn.invars]
            eqns.append(eqn.replace(invars=ins, outvars=[new]))
    keep = [i for i in range(num_res) if i not in chains]
    unknown_j = core.ClosedJaxpr(
        core.Jaxpr(
            u.constvars, [res_in[i] for i in keep] + u.invars[num_res:], eqns + u.eqns, u.outvars
        ),
        unknown_j.consts,
    )
    # The forward body no longer returns them.
    drop_out = {res_src[i][1] for i in chains}
    remap, outvars = {}, []
    for k, v in enumerate(j.outvars):
        if k not in drop_out:
            remap[k] = len(outvars)
            outvars.append(v)
    known_j = core.ClosedJaxpr(
        dce(core.Jaxpr(j.constvars, j.invars, j.eqns, outvars)), known_j.consts
    )
    new_src = []
    for i in keep:
        kind, val = res_src[i]
        new_src.append((kind, remap[val]) if kind == "out" else (kind, val))
    return new_src, known_j, unknown_j


def _chain(v, defs, kept):
    """The cheap equations (in order) that compute ``v`` from the kept residuals' variables
    and literals, or None when there are none or too many."""
    eqns: list = []
    seen: set = set()

    def visit(x) -> bool:
        if type(x) is not core.Var or x in kept or x in seen:
            return True
        d = defs.get(x)
        if d is None:
            return False  # an input of the body that is not a kept residual
        eqn = d[1]
        if eqn.primitive.name not in _CHEAP or len(eqn.outvars) != 1 or has_effects(eqn):
            return False
        seen.add(x)
        if not all(visit(y) for y in eqn.invars):
            return False
        eqns.append(eqn)
        return len(eqns) <= _MAX_RECOMPUTE

    return eqns if visit(v) else None
