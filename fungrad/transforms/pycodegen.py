"""A jaxpr of first-order primitives as a generated Python function (:func:`python_function`).

The eager tape (fungrad/transforms/tape.py) runs each primitive's cached linearization many
times; generated code that calls the primitives' numpy impls directly, with the params and
constants bound as globals, is the cheapest way to do that: no environment to look variables
up in, no ``bind``.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import re

from fungrad import core, float_normalization, impls
from fungrad.array import Array
from fungrad.config import config

__all__ = ["python_function"]


_compiled_count = itertools.count()


def python_function(closed: core.ClosedJaxpr, name: str, out_positions=None):
    """Compile ``closed``, a jaxpr of first-order primitives, to a Python function from numpy
    values to a list of numpy values: one call of its primitive's impl per equation, in
    order, with the params and constants bound as globals of the generated code. This is the
    cheapest way to run a small jaxpr many times (no environment to look variables up in):
    numpy's floating-point error state is set once for the whole function, around the impls
    that would each set it (fungrad.impls.ignore_fp_errors), and a primitive with an entry in
    fungrad.impls.specialized_impls runs the function that entry makes for the equation's avals
    and params. With ``config.check_impl_avals`` a second version of the code runs, which
    checks each impl's output against its equation.

    ``out_positions`` ``(n, positions)`` spreads the outputs over a list of length ``n``, at
    ``positions``, with None elsewhere."""
    jaxpr = closed.jaxpr
    env: dict = {
        "config": config,
        "check": core._check_impl_avals,
        "fp_state": impls.FP_STATE,
        "fp_ignore": impls.FP_IGNORE_ALL,
    }
    names: dict = {}

    def glob(value, prefix: str) -> str:
        n = f"{prefix}{len(env)}"
        env[n] = value
        return n

    for v, c in zip(jaxpr.constvars, closed.consts):
        names[v] = glob(c._value if type(c) is Array else c, "c")
    args = [f"a{i}" for i in range(len(jaxpr.invars))]
    names.update(zip(jaxpr.invars, args))

    def read(x) -> str:
        return glob(x.val, "l") if type(x) is core.Literal else names[x]

    fast, checked, guarded = [], [], False
    for i, e in enumerate(jaxpr.eqns):
        prim, ins = e.primitive, ", ".join(map(read, e.invars))
        if all(k.isidentifier() and not keyword.iskeyword(k) for k in e.params):
            kwargs = [f"{k}={glob(v, 'p')}" for k, v in e.params.items()]
        else:
            kwargs = [f"**{glob(e.params, 'p')}"]
        call_args = ", ".join([ins] * bool(ins) + kwargs)
        impl = impls.unguarded(prim.impl)
        specialize = impls.specialized_impls.get(prim)
        out_avals = [v.aval for v in e.outvars]
        if float_normalization.touches_narrow_float([*(x.aval for x in e.invars), *out_avals]):
            # bfloat16: computed in float32 and rounded back, as EvalTrace and jit do
            widened = float_normalization.widened_impl(
                prim, e.params, out_avals if prim.multiple_results else out_avals[0]
            )
            call = f"{glob(widened, 'f')}({ins})"
        elif (
            impls.FP_STATE is not None
            and specialize is not None
            and not any(type(x) is core.Literal for x in e.invars)
        ):
            call = f"{glob(specialize(*[x.aval for x in e.invars], **e.params), 'g')}({ins})"
            guarded = True
        elif impl is not None:
            call = f"{glob(impl, 'f')}({call_args})"
            guarded = True
        else:
            call = f"{glob(prim.impl, 'f')}({call_args})"
        outs = [f"v{i}_{j}" for j in range(len(e.outvars))]
        names.update(zip(e.outvars, outs))
        avals = [v.aval for v in e.outvars]
        target = ", ".join(outs) + ("," if prim.multiple_results else "") if outs else "_"
        fast.append(f"{target} = {call}")
        checked += [
            f"out = {call}",
            f"check({glob(prim, 'q')}, out, "
            f"{glob(avals if prim.multiple_results else avals[0], 'o')}, "
            f"{glob(e.params, 'k')})",
            f"{target} = out",
        ]
    outs = list(map(read, jaxpr.outvars))
    if out_positions is not None:
        n, positions = out_positions
        spread = ["None"] * n
        for i, o in zip(positions, outs):
            spread[i] = o
        outs = spread
    ret = f"return [{', '.join(outs)}]"
    fast.append(ret)
    checked.append(ret)
    if guarded:
        fast, checked = _fp_guarded(fast), _fp_guarded(checked)
    name = re.sub(r"\W", "_", name)  # (primitive names such as scatter-add)
    signature = ", ".join(args)
    source = "\n".join(
        [
            f"def {name}_checked({signature}):",
            *["    " + b for b in checked],
            f"def {name}({signature}):",
            f"    if config.check_impl_avals: return {name}_checked({signature})",
            *["    " + b for b in fast],
        ]
    )
    filename = f"<fungrad {name} {next(_compiled_count)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), env)  # noqa: S102
    return env[name]


def _fp_guarded(body: list) -> list:
    """Lines of code: ``body`` run with numpy's floating-point errors ignored."""
    return (
        ["token = fp_state.set(fp_ignore)", "try:"]
        + ["    " + line for line in body]
        + ["finally:", "    fp_state.reset(token)"]
    )
