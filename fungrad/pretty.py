"""The jaxpr printer, in JAX's syntax::

    { lambda ; a:f32[5]. let
        b:f32[5] = sin a
        c:f32[5] = mul b 2.0:f32[]
        d:f32[] = reduce_sum[axes=(0,)] c
      in (d,) }

Variables are named a, b, ..., z, ba, bb, ... in order of first appearance; sub-jaxprs held
in params (cond branches, scan bodies) are printed nested with their own names. With
``source_info=True`` each equation ends with a comment naming the user's line that produced it
(``# model.py:42 (loss)``).
"""

from __future__ import annotations

import numpy as np

from fungrad import core


def _encode(n: int) -> str:
    s = ""
    while True:
        n, r = divmod(n, 26)
        s = chr(ord("a") + r) + s
        if n == 0:
            return s


class _Names:
    def __init__(self):
        self.names: dict[core.Var, str] = {}

    def __call__(self, v) -> str:
        if type(v) is core.Literal:
            return pp_literal(v)
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = _encode(len(self.names))
        return name

    def binder(self, v) -> str:
        return f"{self(v)}:{v.aval.str_short()}"


def pp_literal(lit: core.Literal) -> str:
    v = lit.val
    item = v.item() if isinstance(v, (np.ndarray, np.generic)) else v
    if isinstance(item, float):
        text = str(np.asarray(v).astype(lit.aval.dtype)[()])
        if "." not in text and "e" not in text and "n" not in text:
            text += ".0"
    elif isinstance(item, complex):  # numpy's spelling in the literal's precision: (2+0j), 1j
        text = str(np.asarray(v).astype(lit.aval.dtype)[()])
    else:
        text = str(item)
    return f"{text}:{lit.aval.str_short()}"


def _pp_param(value, indent: int, source_info: bool = False) -> str:
    if isinstance(value, (core.Jaxpr, core.ClosedJaxpr)):
        jaxpr = value.jaxpr if isinstance(value, core.ClosedJaxpr) else value
        return pp_jaxpr(jaxpr, indent + 2, source_info=source_info)
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(x, (core.Jaxpr, core.ClosedJaxpr)) for x in value)
    ):
        pad = " " * (indent + 2)
        inner = "\n".join(pad + _pp_param(x, indent + 2, source_info).lstrip() for x in value)
        return "(\n" + inner + "\n" + " " * indent + ")"
    if isinstance(value, np.dtype):
        return value.name
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return str(value)


def pp_params(params: dict, indent: int = 0, source_info: bool = False) -> str:
    if not params:
        return ""
    parts = [f"{k}={_pp_param(v, indent, source_info)}" for k, v in sorted(params.items())]
    return "[" + " ".join(parts) + "]"


def _pp_eqn(eqn: core.JaxprEqn, names: _Names, indent: int, source_info: bool = False) -> str:
    outs = " ".join(names.binder(v) for v in eqn.outvars)
    ins = " ".join(names(v) for v in eqn.invars)
    rhs = f"{eqn.primitive.name}{pp_params(eqn.params, indent, source_info)}"
    text = (f"{outs} = " if outs else "") + rhs + (f" {ins}" if ins else "")
    if source_info and eqn.source_info is not None:
        text += f"  # {eqn.source_info}"
    return text


def pp_eqn(eqn: core.JaxprEqn, source_info: bool = False) -> str:
    """One equation on its own, with fresh names."""
    return _pp_eqn(eqn, _Names(), 0, source_info)


def pp_jaxpr(jaxpr: core.Jaxpr, indent: int = 0, source_info: bool = False) -> str:
    names = _Names()
    consts = " ".join(names.binder(v) for v in jaxpr.constvars)
    ins = " ".join(names.binder(v) for v in jaxpr.invars)
    pad = " " * indent
    lines = [f"{{ lambda {consts + '; ' if consts else '; '}{ins}. let"]
    lines += [f"{pad}    {_pp_eqn(e, names, indent + 4, source_info)}" for e in jaxpr.eqns]
    outs = ", ".join(names(v) for v in jaxpr.outvars)
    if len(jaxpr.outvars) == 1:
        outs += ","
    lines.append(f"{pad}  in ({outs}) }}")
    return "\n".join(lines)
