"""The jaxpr printer, in JAX's syntax::

    { lambda ; a:f32[5]. let
        b:f32[5] = sin a
        c:f32[5] = mul b 2.0:f32[]
        d:f32[] = reduce_sum[axes=(0,)] c
      in (d,) }

A jaxpr whose one-line form fits JAX's width of 80 columns prints on one line, as JAX's does:
``{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }``.

Variables are named a, b, ..., z, ba, bb, ... in order of first appearance; sub-jaxprs held
in params (cond branches, scan bodies) are printed nested, their names continuing the
enclosing jaxpr's (after the equation's outputs), as JAX's. With
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
    """The names given so far, shared by a jaxpr and its sub-jaxprs, and the line width."""

    def __init__(self, width: int = 80):
        self.names: dict[core.Var, str] = {}
        self.width = width

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


def _pp_param(value, indent: int, source_info: bool = False, names=None) -> str:
    if isinstance(value, (core.Jaxpr, core.ClosedJaxpr)):
        jaxpr = value.jaxpr if isinstance(value, core.ClosedJaxpr) else value
        return pp_jaxpr(jaxpr, indent + 2, source_info=source_info, _names=names)
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(x, (core.Jaxpr, core.ClosedJaxpr)) for x in value)
    ):
        pad = " " * (indent + 2)
        inner = "\n".join(
            pad + _pp_param(x, indent + 2, source_info, names).lstrip() for x in value
        )
        return "(\n" + inner + "\n" + " " * indent + ")"
    if isinstance(value, np.dtype):
        return value.name
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return str(value)


def pp_params(params: dict, indent: int = 0, source_info: bool = False, names=None) -> str:
    if not params:
        return ""
    parts = [f"{k}={_pp_param(v, indent, source_info, names)}" for k, v in sorted(params.items())]
    return "[" + " ".join(parts) + "]"


def _pp_eqn(eqn: core.JaxprEqn, names: _Names, indent: int, source_info: bool = False) -> str:
    outs = " ".join(names.binder(v) for v in eqn.outvars)
    ins = " ".join(names(v) for v in eqn.invars)
    rhs = f"{eqn.primitive.name}{pp_params(eqn.params, indent, source_info, names)}"
    text = (f"{outs} = " if outs else "") + rhs + (f" {ins}" if ins else "")
    if source_info and eqn.source_info is not None:
        text += f"  # {eqn.source_info}"
    return text


def pp_eqn(eqn: core.JaxprEqn, source_info: bool = False) -> str:
    """One equation on its own, with fresh names."""
    return _pp_eqn(eqn, _Names(), 0, source_info)


def pp_jaxpr(
    jaxpr: core.Jaxpr,
    indent: int = 0,
    source_info: bool = False,
    _names=None,
    *,
    width: int = 80,
) -> str:
    """The text of ``jaxpr``. A jaxpr (or sub-jaxpr) whose one-line form fits in ``width``
    columns (JAX's default: 80) prints on one line, as JAX's printer lays it out
    (``{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }``); with ``source_info`` every
    equation keeps its own line, for its comment."""
    # sub-jaxprs continue their enclosing jaxpr's names (after the equation's outputs), as
    # JAX's printer names them
    names = _Names(width) if _names is None else _names
    consts = " ".join(names.binder(v) for v in jaxpr.constvars)
    ins = " ".join(names.binder(v) for v in jaxpr.invars)
    pad = " " * indent
    head = f"{{ lambda {consts + '; ' if consts else '; '}{ins}. let"
    eqns = [_pp_eqn(e, names, indent + 4, source_info) for e in jaxpr.eqns]
    outs = ", ".join(names(v) for v in jaxpr.outvars)
    if len(jaxpr.outvars) == 1:
        outs += ","
    if not source_info and not any("\n" in e for e in eqns):
        line = f"{head} {'; '.join(eqns)} in ({outs}) }}"
        if indent + len(line) <= names.width:
            return line
    lines = [head, *(f"{pad}    {e}" for e in eqns), f"{pad}  in ({outs}) }}"]
    return "\n".join(lines)
