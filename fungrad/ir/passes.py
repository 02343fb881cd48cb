"""Jaxpr-to-jaxpr simplification passes. Primitives are pure, so both are always valid.

* :func:`dce` drops equations whose outputs are never used;
* :func:`cse` merges equations that apply the same primitive, with the same params, to the
  same inputs (params are compared by value; sub-jaxpr params by identity);
* :func:`simplify` is CSE then DCE, applied to a ClosedJaxpr (unused constvars dropped too).
"""

from __future__ import annotations

from fungrad import core


def dce(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """Drop equations none of whose outputs is used (transitively) by the jaxpr's outputs."""
    live = {v for v in jaxpr.outvars if type(v) is core.Var}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(v for v in eqn.invars if type(v) is core.Var)
    kept.reverse()
    return core.Jaxpr(jaxpr.constvars, jaxpr.invars, kept, jaxpr.outvars)


def _key_of(x):
    if type(x) is core.Literal:
        return ("lit", x.aval, x.val.item() if hasattr(x.val, "item") else x.val)
    return x


def _params_key(params: dict):
    items = []
    for k, v in sorted(params.items()):
        try:
            hash(v)
        except TypeError:
            return None  # unhashable params: never merged
        items.append((k, v))
    return tuple(items)


def cse(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """Merge repeated equations (same primitive, params and inputs)."""
    seen: dict = {}
    rename: dict[core.Var, core.Var] = {}

    def rn(x):
        return rename.get(x, x) if type(x) is core.Var else x

    eqns = []
    for eqn in jaxpr.eqns:
        invars = [rn(x) for x in eqn.invars]
        pkey = _params_key(eqn.params)
        key = None if pkey is None else (eqn.primitive, tuple(map(_key_of, invars)), pkey)
        if key is not None and key in seen:
            for old, new in zip(eqn.outvars, seen[key]):
                rename[old] = new
            continue
        if key is not None:
            seen[key] = eqn.outvars
        eqns.append(core.JaxprEqn(eqn.primitive, invars, eqn.params, eqn.outvars))
    return core.Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, [rn(v) for v in jaxpr.outvars])


def simplify(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """CSE + DCE; constvars no longer read are dropped with their values."""
    return drop_unused_consts(core.ClosedJaxpr(dce(cse(closed.jaxpr)), closed.consts))


def drop_unused_consts(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    """``closed`` without the constvars (and values) that nothing reads."""
    j = closed.jaxpr
    used = {v for e in j.eqns for v in e.invars if type(v) is core.Var}
    used.update(v for v in j.outvars if type(v) is core.Var)
    keep = [i for i, v in enumerate(j.constvars) if v in used]
    return core.ClosedJaxpr(
        core.Jaxpr([j.constvars[i] for i in keep], j.invars, j.eqns, j.outvars),
        [closed.consts[i] for i in keep])
