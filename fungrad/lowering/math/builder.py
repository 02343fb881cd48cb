"""The builder interface the math algorithms are written against, and the float types.

An algorithm (``exp_log``, ``trig``, ``special``) is a Python function ``f(b, x, ...)`` that
builds straight-line code with a :class:`Builder` ``b`` from :class:`Value` arguments. Values
overload the arithmetic operators, so ``b.fma(r * r, p, r) + 1.0`` reads like the formula; the
builder decides what text each operation becomes. ``llvm.LLVMBuilder`` writes LLVM IR for the
CPU's prelude, ``wgsl.WGSLBuilder`` writes WGSL statements for the GPU: one algorithm, two
renderings, the same roundings.

Types are named as in LLVM: ``"float"``, ``"double"`` (:data:`FLOAT_TYPES`), ``"i1"``,
``"i32"``, ``"i64"``, ``"i128"``. Python numbers mix with values and take the value's type.

What an algorithm may use:
- on values: ``+ - * /`` (``/`` on floats only), ``& | ^ << >>`` on integers and i1 (``>>``
  is arithmetic), unary ``-``, and ``v.ft``, the :class:`FloatType` of a float value;
- on the builder: :meth:`Builder.lift`, :meth:`~Builder.cmp` (LLVM's fcmp/icmp predicates:
  ``"olt"``, ``"uno"``, ``"slt"``, ``"eq"``, ``"ult"``, ...), :meth:`~Builder.select`,
  :meth:`~Builder.not_`, :meth:`~Builder.cast` (LLVM's cast opcodes), :meth:`~Builder.call`
  (another math function, ``fg_<name>_<f32|f64>``), the intrinsics :meth:`~Builder.fma`,
  :meth:`~Builder.rint`, :meth:`~Builder.fabs`, :meth:`~Builder.copysign`,
  :meth:`~Builder.sqrt`, and the operations whose rendering depends on the target's
  arithmetic: :meth:`~Builder.fma_exact`, :meth:`~Builder.two_prod`,
  :meth:`~Builder.sub_multiple`, :meth:`~Builder.keep`, :meth:`~Builder.exact`,
  :meth:`~Builder.ldexp`.

Backends lack some of it: WGSL has no float64 and no 64-bit integers, so the float64 paths
(and the float32 functions that compute in float64 on the CPU) need the LLVM builder, which
also provides ``lshr``, ``load_word`` and ``branch_large`` for them (see ``llvm``).
"""

from __future__ import annotations

import abc
import struct
from dataclasses import dataclass

__all__ = ["F32", "F64", "FLOAT_TYPES", "Builder", "FloatType", "Value"]


@dataclass(frozen=True)
class FloatType:
    """An IEEE binary float type as the algorithms see it (its width picks constants and
    polynomials; the CPU's float32 may take a float64 shortcut, ``x.ft is F32``)."""

    ir: str  # "float" | "double"
    suffix: str  # "f32" | "f64"
    int_ir: str  # integer type of the same width, for bit manipulation
    mant: int  # explicit mantissa bits
    bias: int  # exponent bias

    def round(self, v: float) -> float:
        """``v`` rounded to this type (float32 rounding goes through struct)."""
        if self.ir == "double":
            return float(v)
        return struct.unpack("<f", struct.pack("<f", float(v)))[0]

    def literal(self, v: float) -> str:
        """LLVM spells every float constant as the hex bits of the equal double."""
        bits = struct.unpack("<Q", struct.pack("<d", self.round(v)))[0]
        return f"0x{bits:016X}"


F32 = FloatType("float", "f32", "i32", 23, 127)
F64 = FloatType("double", "f64", "i64", 52, 1023)
FLOAT_TYPES: dict[str, FloatType] = {"float": F32, "double": F64}
"""IR type name -> :class:`FloatType`."""


class Value:
    """A value of IR type ``ty`` in builder ``b``: ``ref`` is how the builder's text names it
    (an SSA name, a ``let`` name or a literal)."""

    __slots__ = ("b", "ref", "ty")

    def __init__(self, b: Builder, ref: str, ty: str):
        self.b, self.ref, self.ty = b, ref, ty

    @property
    def ft(self) -> FloatType:
        return self.b.float_type(self.ty)

    def _op(self, fop: str | None, iop: str | None, other, swap: bool = False) -> Value:
        o = self.b.lift(other, self.ty)
        a, c = (o, self) if swap else (self, o)
        op = fop if self.ty in FLOAT_TYPES else iop
        if op is None:
            raise TypeError(f"math builder: no {fop or iop} on operands of type {self.ty}")
        return self.b.binary(op, a, c)

    def __add__(self, o):
        return self._op("fadd", "add", o)

    def __radd__(self, o):
        return self._op("fadd", "add", o, True)

    def __sub__(self, o):
        return self._op("fsub", "sub", o)

    def __rsub__(self, o):
        return self._op("fsub", "sub", o, True)

    def __mul__(self, o):
        return self._op("fmul", "mul", o)

    def __rmul__(self, o):
        return self._op("fmul", "mul", o, True)

    def __truediv__(self, o):
        return self._op("fdiv", None, o)

    def __rtruediv__(self, o):
        return self._op("fdiv", None, o, True)

    def __and__(self, o):
        return self._op(None, "and", o)

    def __or__(self, o):
        return self._op(None, "or", o)

    def __xor__(self, o):
        return self._op(None, "xor", o)

    def __lshift__(self, o):
        return self._op(None, "shl", o)

    def __rshift__(self, o):
        return self._op(None, "ashr", o)

    def __neg__(self) -> Value:
        return self.b.neg(self)


class Builder(abc.ABC):
    """Collects the statements of one function body (``lines``) and the math functions it
    calls (``callees``, ``fg_<name>_<f32|f64>`` symbols). Subclasses render the operations;
    the methods with a body here are the same on every target unless overridden."""

    def __init__(self):
        self.lines: list[str] = []
        self.callees: set[str] = set()

    def float_type(self, ty: str) -> FloatType:
        """The :class:`FloatType` of IR type ``ty`` (what ``Value.ft`` returns)."""
        return FLOAT_TYPES[ty]

    @abc.abstractmethod
    def lift(self, v, ty: str) -> Value:
        """``v`` as a Value of type ``ty``: a Value of that type as it is, a Python number
        as a literal; a Value of another type is a TypeError."""

    @abc.abstractmethod
    def binary(self, op: str, a: Value, c: Value) -> Value:
        """``a op c`` for the LLVM opcode ``op`` (fadd, sub, shl, ashr, ...); both of one type."""

    @abc.abstractmethod
    def neg(self, v: Value) -> Value:
        """``-v`` (for floats, a sign flip: -0.0 for 0.0)."""

    @abc.abstractmethod
    def cmp(self, pred: str, a, c) -> Value:
        """The i1 comparison ``a pred c`` (LLVM's fcmp predicates for floats, icmp's for
        integers)."""

    @abc.abstractmethod
    def select(self, cond: Value, a, c, ty: str | None = None) -> Value:
        """``a`` where ``cond`` else ``c``; ``ty`` when both are Python numbers."""

    @abc.abstractmethod
    def intrinsic(self, name: str, *args) -> Value:
        """The float intrinsic ``name`` (fma, rint, fabs, copysign, sqrt) of ``args``."""

    @abc.abstractmethod
    def cast(self, op: str, v: Value, ty: str) -> Value:
        """``v`` converted to ``ty`` by the LLVM cast opcode ``op`` (bitcast, fptosi,
        sitofp, fpext, fptrunc, trunc, zext, uitofp)."""

    @abc.abstractmethod
    def call(self, fn: str, *args: Value) -> Value:
        """The math function ``fn`` (``fg_<name>_<f32|f64>``) of ``args``; ``fn`` joins
        ``callees``."""

    @abc.abstractmethod
    def ldexp(self, y: Value, k: Value) -> Value:
        """y * 2**k for an integer k, rounded once (overflow gives inf, a denormal result is
        rounded correctly)."""

    def not_(self, c: Value) -> Value:
        return c ^ True

    def fma(self, a, c, d) -> Value:
        """a c + d for a polynomial step (a target may round it twice)."""
        return self.intrinsic("fma", a, c, d)

    def fma_exact(self, a, c, d) -> Value:
        """fma whose single rounding the algorithm relies on (the residual of an error-free
        transformation, e.g. ``fma(a, c, -a*c)``); a polynomial step uses :meth:`fma`. The
        same instruction here; a target whose fma rounds twice computes this one exactly."""
        return self.fma(a, c, d)

    def keep(self, v: Value) -> Value:
        """``v`` as a value the compiler must not reassociate with its neighbours, where a
        small tail inside it would be lost (``r + (p + t)`` turned into ``(r + p) + t``). LLVM
        without fast-math never does that: here it is ``v`` itself (the WGSL builder hides
        it)."""
        return v

    def exact(self, v):
        """``v`` as an operand of an error-free transformation (two-sum), which relies on each
        of its operations being rounded once as written. A GPU compiler may contract a product
        into a neighbouring add (one fma, so a two-sum's steps see two different values of it)
        or reassociate a sum with its neighbours; the WGSL builder hides such a value there.
        LLVM without fast-math does neither: here it is ``v`` itself."""
        return v

    def two_prod(self, a, c) -> tuple[Value, Value]:
        """(p, e) with p = fl(a c) and p + e == a c exactly (no underflow or overflow)."""
        p = a * c
        return p, self.fma_exact(a, c, -p)

    def sub_multiple(self, k, c: float, x, k_bits: int) -> Value:
        """x - k c, exactly, for an integral k with |k| < 2**k_bits where the caller knows the
        difference is representable (a Cody-Waite reduction step: x is close to k c). One fma
        here; a target whose fma rounds twice splits c instead (the WGSL builder)."""
        return self.fma_exact(-k, c, x)

    def rint(self, a) -> Value:
        return self.intrinsic("rint", a)

    def fabs(self, a) -> Value:
        return self.intrinsic("fabs", a)

    def copysign(self, a, s) -> Value:
        return self.intrinsic("copysign", a, s)

    def sqrt(self, a) -> Value:
        return self.intrinsic("sqrt", a)
