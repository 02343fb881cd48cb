"""The WGSL text of each kernel op: :data:`CODE_FOR_OP`, kernel op name -> function.

This is the kernel shader's ``code_for_op`` (:class:`~fungrad.lowering.render.KernelRenderer`).
Each function takes the kernel shader ``w`` (``w.src``: its prelude, to ask for the helper
functions it calls), the WGSL type ``t`` and dtype ``dt`` of the op's first operand, and the
operands' texts, and returns the result's text. Adding a kernel op to the GPU backend is one
entry here. The four structural ops (``load``, ``select``, ``convert``, ``bitcast``), which
need the expression itself, are written by the kernel shader (``shader.py``).

Semantics follow ``cpu/llvm_ops.py`` (JAX's); see ``shader.py``'s docstring for where WGSL's
builtins differ and how that is handled.
"""

from __future__ import annotations

import numpy as np

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.gpu.types import literal
from fungrad.lowering.kernel import MATH_UNARY

#: kernel ops computed by a wgsl_math function (float32 only)
MATH_OPS = MATH_UNARY | {"pow", "atan2"}

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "idiv": "/", "irem": "%"}


def _compare(op: str):
    def code(w, t: str, dt, a: list[str]) -> str:
        if t == "bool":  # WGSL orders no bools: false < true
            if op in ("eq", "ne"):
                return f"({a[0]} {_CMP[op]} {a[1]})"
            x, y = (a[0], a[1]) if op in ("lt", "le") else (a[1], a[0])
            return f"(!{x} {'&&' if op in ('lt', 'gt') else '||'} {y})"
        if t == "f32" and op == "ne":  # not (a == b): true for NaN even where != is folded
            return f"!({a[0]} == {a[1]})"
        return f"({a[0]} {_CMP[op]} {a[1]})"

    return code


def _arith(op: str):
    def code(w, t: str, dt, a: list[str]) -> str:
        if t == "bool":
            return f"({a[0]} {'|' if op == 'add' else '&' if op == 'mul' else '!='} {a[1]})"
        return f"({a[0]} {_ARITH[op]} {a[1]})"

    return code


def _int_division(op: str):
    def code(w, t: str, dt, a: list[str]) -> str:
        if a[1] == literal(0, dt):  # (5i / 0i) is rejected
            return f"fg_{w.src.need(('div_' if op == 'idiv' else 'rem_') + t)}({a[0]}, {a[1]})"
        return f"({a[0]} {_ARITH[op]} {a[1]})"

    return code


def _div(w, t: str, dt, a: list[str]) -> str:
    if t == "f32" and not w.src.exact_division:
        return f"({a[0]} / {a[1]})"
    return f"fg_{w.src.need(f'div_{t}')}({a[0]}, {a[1]})"


def _rem(w, t: str, dt, a: list[str]) -> str:
    return f"fg_{w.src.need(f'rem_{t}')}({a[0]}, {a[1]})"


def _minmax(op: str):
    """``max``/``min`` (floats: NaN propagates and ``-0 < +0``, which WGSL's builtins do not
    do)."""

    def code(w, t: str, dt, a: list[str]) -> str:
        if t == "f32":
            return f"fg_{w.src.need(op + '_f32')}({a[0]}, {a[1]})"
        if t == "bool":
            return f"({a[0]} {'|' if op == 'max' else '&'} {a[1]})"
        return f"{op}({a[0]}, {a[1]})"

    return code


def _bitwise(op: str):
    def code(w, t: str, dt, a: list[str]) -> str:
        sym = {"and": "&", "or": "|", "xor": "!=" if t == "bool" else "^"}[op]
        return f"({a[0]} {sym} {a[1]})"

    return code


def _not(w, t: str, dt, a: list[str]) -> str:
    return f"(!{a[0]})" if t == "bool" else f"(~{a[0]})"


def _shift(op: str):
    # a shift by a constant >= 32 is a shader-creation error in WGSL, even in the unselected
    # side of a select: the shift is by min(s, 31) wherever s may be that
    def code(w, t: str, dt, a: list[str]) -> str:
        s = f"u32({a[1]})" if t == "i32" else a[1]
        zero, by = literal(0, dt), f"min({s}, 31u)"
        if op == "shl":
            return f"select({a[0]} << {by}, {zero}, {s} >= 32u)"
        if op == "shr_logical":
            shifted = (
                f"bitcast<i32>(bitcast<u32>({a[0]}) >> {by})" if t == "i32" else f"({a[0]} >> {by})"
            )
            return f"select({shifted}, {zero}, {s} >= 32u)"
        signed = f"bitcast<i32>({a[0]})" if t == "u32" else a[0]
        r = f"({signed} >> {by})"
        return f"bitcast<u32>{r}" if t == "u32" else r

    return code


def _neg(w, t: str, dt, a: list[str]) -> str:  # (a literal: -(-5i), never --5i)
    return f"(-({a[0]}))" if a[0].startswith("-") else f"(-{a[0]})"


def _sign(w, t: str, dt, a: list[str]) -> str:
    if t == "f32":
        return f"select(select({a[0]}, -1.0f, {a[0]} < 0.0f), 1.0f, {a[0]} > 0.0f)"
    return f"sign({a[0]})" if t == "i32" else f"select(0u, 1u, {a[0]} != 0u)"


def _call(fn: str):
    """An op that is WGSL builtin ``fn`` of its operands."""

    def code(w, t: str, dt, a: list[str]) -> str:
        return f"{fn}({', '.join(a)})"

    return code


def _helper(name: str):
    """An op that is helper function ``fg_<name>`` (``helpers.HELPERS``) of its operands."""

    def code(w, t: str, dt, a: list[str]) -> str:
        return f"fg_{w.src.need(name)}({', '.join(a)})"

    return code


def _rsqrt(w, t: str, dt, a: list[str]) -> str:
    return f"(1.0f / sqrt({a[0]}))"


def _is_finite(w, t: str, dt, a: list[str]) -> str:
    return f"((bitcast<u32>({a[0]}) & 0x7f800000u) != 0x7f800000u)"


def _math(op: str):
    def code(w, t: str, dt, a: list[str]) -> str:
        if t != "f32":
            raise LoweringError(f"jit(backend='gpu'): {op} of {np.dtype(dt).name}")
        return f"{w.src.need_math(op)}({', '.join(a)})"

    return code


#: kernel op -> fn(kernel shader, WGSL type, dtype, operand texts) -> result text
CODE_FOR_OP = {
    **{op: _compare(op) for op in _CMP},
    **{op: _arith(op) for op in ("add", "sub", "mul")},
    **{op: _int_division(op) for op in ("idiv", "irem")},
    "div": _div,
    "rem": _rem,
    **{op: _minmax(op) for op in ("max", "min")},
    **{op: _bitwise(op) for op in ("and", "or", "xor")},
    "not": _not,
    **{op: _shift(op) for op in ("shl", "shr_logical", "shr_arith")},
    "neg": _neg,
    "abs": _call("abs"),
    "sign": _sign,
    "floor": _call("floor"),
    "ceil": _call("ceil"),
    "sqrt": _call("sqrt"),
    "round_even": _call("round"),
    "round_away": _helper("round_away"),
    "rsqrt": _rsqrt,
    "popcnt": _call("countOneBits"),
    "clz": _call("countLeadingZeros"),
    "isnan": _helper("isnan"),
    "is_finite": _is_finite,
    "nextafter": _helper("nextafter"),
    **{op: _math(op) for op in sorted(MATH_OPS)},
}
