"""LLVM IR for each kernel op, with the semantics the numpy reference implements.

``CODE_FOR_OP`` maps every kernel op to the function writing its instructions (the LLVM
kernel writer's ``code_for_op``, see ``lowering/render.py``); :class:`OpEmitter` holds the
sequences several ops, reductions and stores share (guarded division, shifts, conversions,
min/max, float keys of max/min reductions).

Integer division and remainder never trap (the divisor is guarded: ``x / 0 = -1``,
``x % 0 = x``, ``INT_MIN / -1 = INT_MIN``, as in JAX); shifts by the bit width or more give 0
(or the sign for arithmetic shifts); float max/min propagate NaN and order ``-0 < +0``
(``llvm.maximum``); float -> int conversion saturates and maps NaN to 0 (``fptosi.sat``).
"""

from __future__ import annotations

import numpy as np

from fungrad import dtypes
from fungrad.lowering.cpu.llvm_types import literal, llvm_type, memory_type
from fungrad.lowering.kernel import MATH_UNARY

_FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_ICMP_S = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_ICMP_U = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
_INTRINSIC_SUFFIX = {"half": "f16", "float": "f32", "double": "f64"}


_ty = llvm_type

_FLOAT8_FORMATS = {
    # name: (mantissa bits, exponent bias, kind). "ieee": the top exponent holds inf and NaN;
    # "fn": no inf, S.1111.111 is NaN; "fnuz": no inf, no -0, 0x80 is the only NaN;
    # "e8m0": a bare exponent (no sign, no zero, 0xff is NaN)
    "float8_e3m4": (4, 3, "ieee"),
    "float8_e4m3": (3, 7, "ieee"),
    "float8_e5m2": (2, 15, "ieee"),
    "float8_e4m3fn": (3, 7, "fn"),
    "float8_e4m3fnuz": (3, 8, "fnuz"),
    "float8_e5m2fnuz": (2, 16, "fnuz"),
    "float8_e4m3b11fnuz": (3, 11, "fnuz"),
    "float8_e8m0fnu": (0, 127, "e8m0"),
}
"""The float8 formats the CPU backend converts (JAX's float8 types, ml_dtypes' encodings)."""


def _lit(value, dtype):
    return literal(value, np.dtype(dtype))


class OpEmitter:
    """The instruction sequences shared by several kernel ops, reductions and stores (one per
    module writer: its ``tmp`` names are unique in the module)."""

    def __init__(self, module):
        self.m = module
        self.n = 0

    def tmp(self) -> str:
        self.n += 1
        return f"%o{self.n}"

    # helpers ----------------------------------------------------------------------------
    def minmax(self, lines, out, op, dt, a, b) -> str:
        ty = _ty(dt)
        if dt.kind == "f":
            name = "maximum" if op == "max" else "minimum"
            lines.append(
                f"  {out} = call {ty} @llvm.{name}.{_INTRINSIC_SUFFIX[ty]}({ty} {a}, {ty} {b})"
            )
            return out
        if dt.kind == "b":
            lines.append(f"  {out} = {'or' if op == 'max' else 'and'} i1 {a}, {b}")
            return out
        pre = "s" if dt.kind == "i" else "u"
        lines.append(f"  {out} = call {ty} @llvm.{pre}{op}.{ty}({ty} {a}, {ty} {b})")
        return out

    def _div_invariant(self, lines, out, args, outer: list[str], kw) -> str:
        """float32 ``x / y`` for a loop-invariant ``y``: llvm_math.DIVIDE (exact), its
        operands computed once in ``y``'s scope (``outer``, its lines)."""
        from fungrad.lowering.math import llvm as llvm_math

        x, y = args
        ops = kw.recips.get(y)
        if ops is None:
            ops = kw.recips[y] = (self.tmp(), self.tmp())
            outer += llvm_math.divisor_lines(y, *ops)
        self.m.helpers.add(llvm_math.DIVIDE)
        lines.append(llvm_math.divide_call(out, x, y, *ops))
        return out

    def _div_rem(self, lines, out, op, dt, args) -> str:
        ty = _ty(dt)
        x, y = args
        if dt.kind == "f":
            lines.append(f"  {out} = {'fdiv' if op == 'div' else 'frem'} {ty} {x}, {y}")
            return out
        zero, bad, safe, q = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        lines.append(f"  {zero} = icmp eq {ty} {y}, 0")
        if dt.kind == "i":
            mn = _lit(np.iinfo(dt).min, dt)
            c1, c2, c3 = self.tmp(), self.tmp(), self.tmp()
            lines.append(f"  {c1} = icmp eq {ty} {x}, {mn}")
            lines.append(f"  {c2} = icmp eq {ty} {y}, -1")
            lines.append(f"  {c3} = and i1 {c1}, {c2}")
            lines.append(f"  {bad} = or i1 {zero}, {c3}")
            ins = "sdiv" if op == "div" else "srem"
        else:
            lines.append(f"  {bad} = or i1 {zero}, false")
            ins = "udiv" if op == "div" else "urem"
        lines.append(f"  {safe} = select i1 {bad}, {ty} 1, {ty} {y}")
        lines.append(f"  {q} = {ins} {ty} {x}, {safe}")
        on_zero = "-1" if op == "div" else x
        lines.append(f"  {out} = select i1 {zero}, {ty} {on_zero}, {ty} {q}")
        return out

    def _shift(self, lines, out, op, dt, args) -> str:
        ty = _ty(dt)
        bits = 8 * dt.itemsize
        x, y = args
        big, s, r = self.tmp(), self.tmp(), self.tmp()
        lines.append(f"  {big} = icmp uge {ty} {y}, {bits}")
        lines.append(f"  {s} = select i1 {big}, {ty} 0, {ty} {y}")
        ins = {"shl": "shl", "shr_logical": "lshr", "shr_arith": "ashr"}[op]
        lines.append(f"  {r} = {ins} {ty} {x}, {s}")
        if op == "shr_arith":
            fill = self.tmp()
            lines.append(f"  {fill} = ashr {ty} {x}, {bits - 1}")
            lines.append(f"  {out} = select i1 {big}, {ty} {fill}, {ty} {r}")
        else:
            lines.append(f"  {out} = select i1 {big}, {ty} 0, {ty} {r}")
        return out

    def _sign(self, lines, out, dt, x) -> str:
        ty = _ty(dt)
        if dt.kind == "f":
            gt, lt, s = self.tmp(), self.tmp(), self.tmp()
            lines.append(f"  {gt} = fcmp ogt {ty} {x}, {_lit(0, dt)}")
            lines.append(f"  {lt} = fcmp olt {ty} {x}, {_lit(0, dt)}")
            lines.append(f"  {s} = select i1 {lt}, {ty} {_lit(-1, dt)}, {ty} {x}")
            lines.append(f"  {out} = select i1 {gt}, {ty} {_lit(1, dt)}, {ty} {s}")
            return out
        if dt.kind == "u":
            nz = self.tmp()
            lines.append(f"  {nz} = icmp ne {ty} {x}, 0")
            lines.append(f"  {out} = zext i1 {nz} to {ty}")
            return out
        gt, lt, a, b = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        lines.append(f"  {gt} = icmp sgt {ty} {x}, 0")
        lines.append(f"  {lt} = icmp slt {ty} {x}, 0")
        lines.append(f"  {a} = zext i1 {gt} to {ty}")
        lines.append(f"  {b} = zext i1 {lt} to {ty}")
        lines.append(f"  {out} = sub {ty} {a}, {b}")
        return out

    def _nextafter(self, lines, out, dt, args) -> str:
        """On the bit pattern: step the magnitude away from or toward zero (vectorisable)."""
        ty = _ty(dt)
        ity = f"i{8 * dt.itemsize}"
        x, y = args
        t = [self.tmp() for _ in range(14)]
        lines += [
            f"  {t[0]} = fcmp uno {ty} {x}, {y}",
            f"  {t[1]} = fadd {ty} {x}, {y}",
            f"  {t[2]} = fcmp oeq {ty} {x}, {y}",
            f"  {t[3]} = bitcast {ty} {x} to {ity}",
            f"  {t[4]} = fcmp oeq {ty} {x}, {_lit(0, dt)}",
            # from zero: the smallest subnormal with y's sign
            f"  {t[5]} = bitcast {ty} {y} to {ity}",
            f"  {t[6]} = and {ity} {t[5]}, {-(1 << (8 * dt.itemsize - 1))}",
            f"  {t[7]} = or {ity} {t[6]}, 1",
            # away from zero when (y > x) == (x > 0)
            f"  {t[8]} = fcmp olt {ty} {x}, {y}",
            f"  {t[9]} = fcmp ogt {ty} {x}, {_lit(0, dt)}",
            f"  {t[10]} = icmp eq i1 {t[8]}, {t[9]}",
            f"  {t[11]} = select i1 {t[10]}, {ity} 1, {ity} -1",
            f"  {t[12]} = add {ity} {t[3]}, {t[11]}",
            f"  {t[13]} = select i1 {t[4]}, {ity} {t[7]}, {ity} {t[12]}",
        ]
        r, s = self.tmp(), self.tmp()
        lines.append(f"  {r} = bitcast {ity} {t[13]} to {ty}")
        lines.append(f"  {s} = select i1 {t[2]}, {ty} {y}, {ty} {r}")
        lines.append(f"  {out} = select i1 {t[0]}, {ty} {t[1]}, {ty} {s}")
        return out

    def _math(self, lines, out, op, dt, args) -> str:
        ty = _ty(dt)
        if dt.itemsize == 2:  # half: compute in float, round once
            wide = [self.tmp() for _ in args]
            for w, a in zip(wide, args):
                lines.append(f"  {w} = fpext half {a} to float")
            r = self.tmp()
            self._math(lines, r, op, np.dtype(np.float32), wide)
            lines.append(f"  {out} = fptrunc float {r} to half")
            return out
        sym = self.m.need_math(op, dt)
        params = ", ".join(f"{ty} {a}" for a in args)
        lines.append(f"  {out} = call {ty} @{sym}({params})")
        return out

    def convert(self, lines, out, src, dst, x, kw) -> str:
        if dtypes.is_float8(src) or dtypes.is_float8(dst):
            return self._float8_convert(lines, out, src, dst, x, kw)
        if dtypes.is_ml_float(src) or dtypes.is_ml_float(dst):
            return self._bfloat16_convert(lines, out, src, dst, x, kw)
        st, dt_ = _ty(src), _ty(dst)
        sk, dk = src.kind, dst.kind
        if sk == "f" and dk == "f":
            if src.itemsize == 8 and dst.itemsize == 2:
                return self._double_to_half(lines, out, x)
            ins = "fpext" if dst.itemsize > src.itemsize else "fptrunc"
            lines.append(f"  {out} = {ins} {st} {x} to {dt_}")
        elif dk == "b":
            if sk == "f":
                lines.append(f"  {out} = fcmp une {st} {x}, {_lit(0, src)}")
            else:
                lines.append(f"  {out} = icmp ne {st} {x}, 0")
        elif dk == "f":
            ins = "sitofp" if sk == "i" else "uitofp"
            lines.append(f"  {out} = {ins} {st} {x} to {dt_}")
        elif sk == "f":
            sat = "fptosi" if dk == "i" else "fptoui"
            lines.append(
                f"  {out} = call {dt_} @llvm.{sat}.sat.{dt_}.{_INTRINSIC_SUFFIX[st]}({st} {x})"
            )
        else:  # int/bool -> int
            sb = 1 if sk == "b" else 8 * src.itemsize
            db = 8 * dst.itemsize
            if sb == db:
                return x
            if db < sb:
                lines.append(f"  {out} = trunc {st} {x} to {dt_}")
            else:
                ins = "sext" if sk == "i" else "zext"
                lines.append(f"  {out} = {ins} {st} {x} to {dt_}")
        return out

    def _bfloat16_convert(self, lines, out, src, dst, x, kw) -> str:
        """Conversions to and from bfloat16 (held as ``i16`` bits) through float32, as JAX's
        (so int32 and float64 values round twice, as there). bfloat16 -> float32 is exact (the
        bits shifted up); float32 -> bfloat16 rounds to nearest, ties to even, on the bits
        (``llvm.fptrunc`` to ``bfloat`` would call a runtime function the JIT lacks), overflow
        gives inf and every NaN the quiet NaN ``0x7fc0`` with its sign, as XLA and ml_dtypes."""
        f32 = np.dtype(np.float32)
        if dtypes.is_ml_float(src):
            wide, sh, f = self.tmp(), self.tmp(), self.tmp() if dst != f32 else out
            lines += [
                f"  {wide} = zext i16 {x} to i32",
                f"  {sh} = shl i32 {wide}, 16",
                f"  {f} = bitcast i32 {sh} to float",
            ]
            return f if dst == f32 else self.convert(lines, out, f32, dst, f, kw)
        if src != f32:
            x = self.convert(lines, self.tmp(), src, f32, x, kw)
        u, lsb, odd, bias, r, hi, nan, sign, nanbits, sel = (self.tmp() for _ in range(10))
        lines += [
            f"  {u} = bitcast float {x} to i32",
            f"  {lsb} = lshr i32 {u}, 16",
            f"  {odd} = and i32 {lsb}, 1",
            f"  {bias} = add i32 {odd}, 32767",
            f"  {r} = add i32 {u}, {bias}",
            f"  {hi} = lshr i32 {r}, 16",
            f"  {nan} = fcmp uno float {x}, {x}",
            f"  {sign} = and i32 {lsb}, 32768",
            f"  {nanbits} = or i32 {sign}, 32704",
            f"  {sel} = select i1 {nan}, i32 {nanbits}, i32 {hi}",
            f"  {out} = trunc i32 {sel} to i16",
        ]
        return out

    def _float8_convert(self, lines, out, src, dst, x, kw) -> str:
        """Conversions to and from JAX's float8 types (held as ``i8`` bits) through float32, as
        JAX's, in integer code (see :data:`_FLOAT8_FORMATS`)."""
        f32 = np.dtype(np.float32)
        if dtypes.is_float8(src):
            f = out if dst == f32 else self.tmp()
            self._float8_to_float(lines, f, src, x)
            return f if dst == f32 else self.convert(lines, out, f32, dst, f, kw)
        if src != f32:
            x = self.convert(lines, self.tmp(), src, f32, x, kw)
        return self._float_to_float8(lines, out, dst, x)

    def _float8_to_float(self, lines, out, src, x) -> str:
        """float8 bits -> float32, exact: a normal value's exponent is rebiased and its
        mantissa shifted up, a subnormal's mantissa converted and scaled by a power of two
        (exact); NaN is the positive quiet NaN ``0x7fc00000`` whatever its sign, as XLA's."""
        m, bias, fmt = _FLOAT8_FORMATS[src.name]
        t = [self.tmp() for _ in range(16)]
        lines.append(f"  {t[0]} = zext i8 {x} to i32")
        b = t[0]
        if fmt == "e8m0":  # 2**(b - 127); 0 is 2**-127 (a float32 subnormal); 0xff is NaN
            lines += [
                f"  {t[1]} = shl i32 {b}, 23",
                f"  {t[2]} = icmp eq i32 {b}, 0",
                f"  {t[3]} = select i1 {t[2]}, i32 4194304, i32 {t[1]}",
                f"  {t[4]} = icmp eq i32 {b}, 255",
                f"  {t[5]} = select i1 {t[4]}, i32 2143289344, i32 {t[3]}",
                f"  {out} = bitcast i32 {t[5]} to float",
            ]
            return out
        lines += [
            f"  {t[1]} = and i32 {b}, 128",
            f"  {t[2]} = shl i32 {t[1]}, 24",  # the sign
            f"  {t[3]} = and i32 {b}, 127",  # the magnitude's bits
            f"  {t[4]} = lshr i32 {t[3]}, {m}",  # the exponent field
            f"  {t[5]} = and i32 {t[3]}, {(1 << m) - 1}",  # the mantissa field
            f"  {t[6]} = shl i32 {t[3]}, {23 - m}",
            f"  {t[7]} = add i32 {t[6]}, {(127 - bias) << 23}",  # normal: rebiased
            f"  {t[8]} = uitofp i32 {t[5]} to float",
            f"  {t[9]} = fmul float {t[8]}, {_lit(2.0 ** (1 - bias - m), np.float32)}",
            f"  {t[10]} = bitcast float {t[9]} to i32",  # subnormal: mantissa * 2**(1-bias-m)
            f"  {t[11]} = icmp eq i32 {t[4]}, 0",
            f"  {t[12]} = select i1 {t[11]}, i32 {t[10]}, i32 {t[7]}",
        ]
        mag = t[12]
        if fmt == "ieee":  # the top exponent: inf (mantissa 0) or NaN
            top = (1 << (7 - m)) - 1
            inf_nan = [self.tmp() for _ in range(4)]
            lines += [
                f"  {inf_nan[0]} = icmp eq i32 {t[4]}, {top}",
                f"  {inf_nan[1]} = icmp eq i32 {t[5]}, 0",
                f"  {inf_nan[2]} = select i1 {inf_nan[1]}, i32 2139095040, i32 4290772992",
                f"  {inf_nan[3]} = select i1 {inf_nan[0]}, i32 {inf_nan[2]}, i32 {mag}",
            ]
            mag = inf_nan[3]
        elif fmt == "fn":  # S.1111.111 is NaN; no inf
            isnan, v = self.tmp(), self.tmp()
            lines += [
                f"  {isnan} = icmp eq i32 {t[3]}, 127",
                f"  {v} = select i1 {isnan}, i32 4290772992, i32 {mag}",
            ]
            mag = v
        # (a NaN is marked 0xffc00000 above, which the sign's or keeps, then made 0x7fc00000)
        lines.append(f"  {t[13]} = or i32 {t[2]}, {mag}")
        bits = t[13]
        if fmt != "fnuz":  # NaN loses its sign, as XLA's
            isnan, v = self.tmp(), self.tmp()
            lines += [
                f"  {isnan} = icmp eq i32 {mag}, 4290772992",
                f"  {v} = select i1 {isnan}, i32 2143289344, i32 {bits}",
            ]
            bits = v
        else:  # 0x80 (the negative zero's pattern) is the only NaN
            isnan, v = self.tmp(), self.tmp()
            lines += [
                f"  {isnan} = icmp eq i32 {b}, 128",
                f"  {v} = select i1 {isnan}, i32 2143289344, i32 {bits}",
            ]
            bits = v
        lines.append(f"  {out} = bitcast i32 {bits} to float")
        return out

    def _float_to_float8(self, lines, out, dst, x) -> str:
        """float32 -> float8 bits, in integer code: to nearest, ties to even (a normal result
        by adding half an ulp less one plus the kept lowest bit, as bfloat16's; a subnormal one
        by the same on the full significand, shifted by a computed amount), then the format's
        rules as ml_dtypes' and XLA's: overflow gives inf (IEEE-like types) or NaN (``fn``,
        ``fnuz``), NaN the format's quiet NaN with the sign (none in ``fnuz``, where -0.0 is
        0). float8_e8m0fnu (a power of two, no sign, no zero) has its own rule."""
        m, bias, fmt = _FLOAT8_FORMATS[dst.name]
        t = [self.tmp() for _ in range(12)]
        lines += [
            f"  {t[0]} = bitcast float {x} to i32",
            f"  {t[1]} = and i32 {t[0]}, 2147483647",  # |x|'s bits
            f"  {t[2]} = lshr i32 {t[1]}, 23",  # its biased exponent
            f"  {t[3]} = icmp ugt i32 {t[1]}, 2139095040",  # NaN
        ]
        u, a, e, nan = t[0], t[1], t[2], t[3]
        if fmt == "e8m0":
            # ml_dtypes' and XLA's: a normal float32 rounds its exponent up from half way, a
            # subnormal one to nearest with ties down (to 2**-127); NaN, 0, negatives, and
            # values over 2**127 give NaN (0xff)
            v = [self.tmp() for _ in range(10)]
            lines += [
                f"  {v[0]} = add i32 {a}, 4194304",
                f"  {v[1]} = add i32 {a}, 4194303",
                f"  {v[2]} = icmp eq i32 {e}, 0",
                f"  {v[3]} = select i1 {v[2]}, i32 {v[1]}, i32 {v[0]}",
                f"  {v[4]} = lshr i32 {v[3]}, 23",
                f"  {v[5]} = icmp ugt i32 {v[4]}, 254",
                f"  {v[6]} = icmp slt i32 {u}, 0",
                f"  {v[7]} = icmp eq i32 {a}, 0",
                f"  {v[8]} = or i1 {v[5]}, {v[6]}",
                f"  {v[9]} = or i1 {v[7]}, {nan}",
            ]
            bad, r = self.tmp(), self.tmp()
            lines += [
                f"  {bad} = or i1 {v[8]}, {v[9]}",
                f"  {r} = select i1 {bad}, i32 255, i32 {v[4]}",
                f"  {out} = trunc i32 {r} to i8",
            ]
            return out
        shift = 23 - m
        lines += [
            # a normal result: rounded on |x|'s bits, then the exponent rebiased
            f"  {t[4]} = lshr i32 {a}, {shift}",
            f"  {t[5]} = and i32 {t[4]}, 1",
            f"  {t[6]} = add i32 {a}, {(1 << (shift - 1)) - 1}",
            f"  {t[7]} = add i32 {t[6]}, {t[5]}",
            f"  {t[8]} = lshr i32 {t[7]}, {shift}",
            f"  {t[9]} = sub i32 {t[8]}, {(127 - bias) << m}",
            f"  {t[10]} = icmp ult i32 {e}, {128 - bias}",  # the result is subnormal (or 0)
            f"  {t[11]} = lshr i32 {t[0]}, 24",
        ]
        s = [self.tmp() for _ in range(16)]
        lines += [
            # a subnormal result: the significand (implicit bit set) shifted right by
            # shift + 1 - (its exponent in the format's bias), at most 25 (all bits gone)
            f"  {s[0]} = and i32 {a}, 8388607",
            f"  {s[1]} = or i32 {s[0]}, 8388608",
            f"  {s[2]} = sub i32 {shift + 128 - bias}, {e}",
            f"  {s[3]} = icmp slt i32 {s[2]}, 1",
            f"  {s[4]} = select i1 {s[3]}, i32 1, i32 {s[2]}",
            f"  {s[5]} = icmp sgt i32 {s[4]}, 25",
            f"  {s[6]} = select i1 {s[5]}, i32 25, i32 {s[4]}",
            f"  {s[7]} = sub i32 {s[6]}, 1",
            f"  {s[8]} = shl i32 1, {s[7]}",
            f"  {s[9]} = sub i32 {s[8]}, 1",
            f"  {s[10]} = lshr i32 {s[1]}, {s[6]}",
            f"  {s[11]} = and i32 {s[10]}, 1",
            f"  {s[12]} = add i32 {s[1]}, {s[9]}",
            f"  {s[13]} = add i32 {s[12]}, {s[11]}",
            f"  {s[14]} = lshr i32 {s[13]}, {s[6]}",
            f"  {s[15]} = select i1 {t[10]}, i32 {s[14]}, i32 {t[9]}",
        ]
        r, sign = s[15], self.tmp()
        lines.append(f"  {sign} = and i32 {t[11]}, 128")
        f = [self.tmp() for _ in range(6)]
        if fmt == "fnuz":  # overflow and NaN: 0x80; no negative zero
            lines += [
                f"  {f[0]} = icmp ugt i32 {r}, 127",
                f"  {f[1]} = or i1 {f[0]}, {nan}",
                f"  {f[2]} = icmp eq i32 {r}, 0",
                f"  {f[3]} = or i32 {sign}, {r}",
                f"  {f[4]} = select i1 {f[2]}, i32 0, i32 {f[3]}",
                f"  {f[5]} = select i1 {f[1]}, i32 128, i32 {f[4]}",
            ]
        else:
            if fmt == "ieee":  # overflow: inf; NaN: the quiet NaN
                top = ((1 << (7 - m)) - 1) << m
                big, nan_bits = top, top | (1 << (m - 1))
            else:  # fn: overflow and NaN: S.1111.111
                big = nan_bits = 127
            lines += [
                f"  {f[0]} = icmp ugt i32 {r}, {big}",
                f"  {f[1]} = select i1 {f[0]}, i32 {big}, i32 {r}",
                f"  {f[2]} = select i1 {nan}, i32 {nan_bits}, i32 {f[1]}",
                f"  {f[5]} = or i32 {sign}, {f[2]}",
            ]
        lines.append(f"  {out} = trunc i32 {f[5]} to i8")
        return out

    def _double_to_half(self, lines, out, x) -> str:
        """``fptrunc double -> half`` correctly rounded, without the runtime function x86
        needs for it (``__truncdfhf2``, absent from the JIT: the call jumped to null). Through
        float, rounded to odd (toward zero, then the last bit set when inexact): float keeps
        13 bits more than half, so the second rounding is the only one (no double rounding).
        NaN stays NaN, overflow becomes inf, tiny values 0, signs kept."""
        f, back, inexact, mag_f, mag_x, away, bits, down, trunc, odd, fo = (
            self.tmp() for _ in range(11)
        )
        lines += [
            f"  {f} = fptrunc double {x} to float",
            f"  {back} = fpext float {f} to double",
            f"  {inexact} = fcmp une double {back}, {x}",
            f"  {mag_f} = call double @llvm.fabs.f64(double {back})",
            f"  {mag_x} = call double @llvm.fabs.f64(double {x})",
            f"  {away} = fcmp ogt double {mag_f}, {mag_x}",  # rounded up in magnitude
            f"  {bits} = bitcast float {f} to i32",
            f"  {down} = sub i32 {bits}, 1",
            f"  {trunc} = select i1 {away}, i32 {down}, i32 {bits}",
            f"  {odd} = or i32 {trunc}, 1",
            f"  {fo} = select i1 {inexact}, i32 {odd}, i32 {bits}",
            f"  {out}.f = bitcast i32 {fo} to float",
            f"  {out} = fptrunc float {out}.f to half",
        ]
        return out

    def combine(self, lines, out, op, dt, acc, val, exact: bool = False) -> None:
        """``out = acc (op) val`` for a reduction (reassociable floats unless ``exact``)."""
        ty = _ty(dt)
        if op in ("max", "min"):
            self.minmax(lines, out, op, dt, acc, val)
            return
        if dt.kind == "f" and op in ("add", "mul"):
            flags = "" if exact else " reassoc contract"
            lines.append(f"  {out} = f{op}{flags} {ty} {acc}, {val}")
            return
        if dt.kind == "b":
            op = {"add": "or", "mul": "and"}.get(op, op)
        lines.append(f"  {out} = {op} {ty} {acc}, {val}")

    # Float max/min reductions run on integer keys: ``llvm.maximum`` (NaN-propagating, -0 < +0)
    # has no single x86 instruction, and its reduction loop was a serial chain of six
    # instructions per vector (softmax's row max; 4% of its time). The key of a float is its
    # bit pattern with the magnitude bits flipped for negative values, so signed integer order
    # is float order (-0 < +0); NaN gets the extreme key, so it wins as in ``llvm.maximum``.
    # Integer smax/smin reductions vectorise and interleave fully. The map is an involution.
    @staticmethod
    def key_type(dt) -> str:
        return f"i{8 * dt.itemsize}"

    @staticmethod
    def key_literal(value, dt) -> str:
        """The key of the float ``value`` in ``dt``, as an integer literal."""
        raw = int(np.asarray(value, dt).view(f"i{dt.itemsize}"))
        return str(raw ^ ((1 << (8 * dt.itemsize - 1)) - 1) if raw < 0 else raw)

    def _flip(self, lines, ity: str, v: str) -> str:
        """``v ^ ((v >> (bits - 1)) & INT_MAX)``: float bits <-> key, both ways."""
        bits = int(ity[1:])
        sign, mag, out = self.tmp(), self.tmp(), self.tmp()
        lines += [
            f"  {sign} = ashr {ity} {v}, {bits - 1}",
            f"  {mag} = and {ity} {sign}, {(1 << (bits - 1)) - 1}",
            f"  {out} = xor {ity} {v}, {mag}",
        ]
        return out

    def float_key(self, lines, op, dt, x) -> str:
        """The key of float ``x`` for a ``max``/``min`` reduction (NaN the winning extreme)."""
        ity, ty = self.key_type(dt), _ty(dt)
        raw, nan, out = self.tmp(), self.tmp(), self.tmp()
        lines.append(f"  {raw} = bitcast {ty} {x} to {ity}")
        key = self._flip(lines, ity, raw)
        bits = 8 * dt.itemsize
        extreme = (1 << (bits - 1)) - 1 if op == "max" else -(1 << (bits - 1))
        lines += [
            f"  {nan} = fcmp uno {ty} {x}, {x}",
            f"  {out} = select i1 {nan}, {ity} {extreme}, {ity} {key}",
        ]
        return out

    def from_key(self, lines, dt, key) -> str:
        """The float whose key is ``key`` (the NaN keys give NaNs)."""
        out = self.tmp()
        raw = self._flip(lines, self.key_type(dt), key)
        lines.append(f"  {out} = bitcast {self.key_type(dt)} {raw} to {_ty(dt)}")
        return out

    def arg_better(self, lines, op, dt, v, acc, kw) -> str:
        """Does ``v`` replace the current extreme ``acc`` (first occurrence wins; NaN is the
        extreme of floats)?"""
        ty = _ty(dt)
        out = self.tmp()
        if dt.kind == "f":
            c, vn, an, nan_wins = self.tmp(), self.tmp(), self.tmp(), self.tmp()
            lines.append(f"  {c} = fcmp {'ogt' if op == 'argmax' else 'olt'} {ty} {v}, {acc}")
            lines.append(f"  {vn} = fcmp uno {ty} {v}, {v}")
            lines.append(f"  {an} = fcmp ord {ty} {acc}, {acc}")
            lines.append(f"  {nan_wins} = and i1 {vn}, {an}")
            lines.append(f"  {out} = or i1 {c}, {nan_wins}")
            return out
        table = _ICMP_S if dt.kind == "i" else _ICMP_U
        lines.append(f"  {out} = icmp {table['gt' if op == 'argmax' else 'lt']} {ty} {v}, {acc}")
        return out


# -- the kernel ops ---------------------------------------------------------------------------
# Each entry: ``fn(kw, e, lines, out, args) -> name``: append the instructions computing op
# ``e`` on the operand values ``args`` to ``lines`` (the scope where ``e`` is placed) and
# return the result's name (usually ``out``). ``kw`` is the kernel writer (cpu/kernel.py);
# ``kw.m.ops`` the module's OpEmitter.


def _load(kw, e, lines, out, args):
    buf = e.attr
    p = kw.tmp("p")
    lines.append(
        f"  {p} = getelementptr inbounds {memory_type(buf.dtype)}, "
        f"ptr {kw.bufs[buf.id]}, i64 {args[0]}"
    )
    return kw.load(lines, out, p, buf.dtype)


def _select(kw, e, lines, out, args):
    ty = _ty(e.dtype)
    lines.append(f"  {out} = select i1 {args[0]}, {ty} {args[1]}, {ty} {args[2]}")
    return out


def _convert(kw, e, lines, out, args):
    return kw.m.ops.convert(lines, out, e.args[0].dtype, e.dtype, args[0], kw)


def _bitcast(kw, e, lines, out, args):
    lines.append(f"  {out} = bitcast {_ty(e.args[0].dtype)} {args[0]} to {_ty(e.dtype)}")
    return out


def _compare(kw, e, lines, out, args):
    dt = e.args[0].dtype
    ty, op = _ty(dt), e.op
    if dt.kind == "f":
        lines.append(f"  {out} = fcmp {_FCMP[op]} {ty} {args[0]}, {args[1]}")
    else:
        table = _ICMP_S if dt.kind == "i" else _ICMP_U
        lines.append(f"  {out} = icmp {table[op]} {ty} {args[0]}, {args[1]}")
    return out


def _arith(kw, e, lines, out, args):
    dt = e.args[0].dtype
    op = e.op
    if dt.kind == "b":  # bool add is or, mul is and
        ins = {"add": "or", "mul": "and", "sub": "xor"}[op]
    else:
        ins = ("f" + op) if dt.kind == "f" else op
    lines.append(f"  {out} = {ins} {_ty(dt)} {args[0]}, {args[1]}")
    return out


def _index_div(kw, e, lines, out, args):
    """Index arithmetic: non-negative operands, non-zero divisors."""
    ins = "udiv" if e.op == "idiv" else "urem"
    lines.append(f"  {out} = {ins} i64 {args[0]}, {args[1]}")
    return out


def _div(kw, e, lines, out, args):
    # Exact, never ``arcp``: x * (1/y) is up to 1 ulp off, and only where LLVM's optimiser
    # chose it, so a value recomputed by another kernel (O0 glue, or y not loop-invariant
    # there) differed from the stored one: relu's gradient tests ``x == max(x, 0)`` and lost
    # elements (issue 15). A float32 divisor computed outside the loop (softmax's row sum)
    # gets the same result without a divide per element (llvm_math.DIVIDE); not a constant
    # one (a mean's 1/n: LLVM turns the powers of two into products, and the helper's
    # functions cost compile time)
    dt = e.args[0].dtype
    em = kw.m.ops
    if dt == np.float32 and e.args[1].op != "const" and kw.scope(e.args[1]) is not kw.scope(e):
        return em._div_invariant(lines, out, args, kw.lines[kw.scope(e.args[1])], kw)
    return em._div_rem(lines, out, "div", dt, args)


def _rem(kw, e, lines, out, args):
    return kw.m.ops._div_rem(lines, out, "rem", e.args[0].dtype, args)


def _minmax(kw, e, lines, out, args):
    return kw.m.ops.minmax(lines, out, e.op, e.args[0].dtype, args[0], args[1])


def _bitwise(kw, e, lines, out, args):
    lines.append(f"  {out} = {e.op} {_ty(e.args[0].dtype)} {args[0]}, {args[1]}")
    return out


def _not(kw, e, lines, out, args):
    dt = e.args[0].dtype
    lines.append(f"  {out} = xor {_ty(dt)} {args[0]}, {'true' if dt.kind == 'b' else -1}")
    return out


def _shift(kw, e, lines, out, args):
    return kw.m.ops._shift(lines, out, e.op, e.args[0].dtype, args)


def _neg(kw, e, lines, out, args):
    dt = e.args[0].dtype
    ty = _ty(dt)
    if dt.kind == "f":
        lines.append(f"  {out} = fneg {ty} {args[0]}")
    else:
        lines.append(f"  {out} = sub {ty} 0, {args[0]}")
    return out


def _abs(kw, e, lines, out, args):
    dt = e.args[0].dtype
    ty = _ty(dt)
    if dt.kind == "f":
        lines.append(f"  {out} = call {ty} @llvm.fabs.{_INTRINSIC_SUFFIX[ty]}({ty} {args[0]})")
    else:
        lines.append(f"  {out} = call {ty} @llvm.abs.{ty}({ty} {args[0]}, i1 false)")
    return out


def _sign(kw, e, lines, out, args):
    return kw.m.ops._sign(lines, out, e.args[0].dtype, args[0])


def _float_intrinsic(kw, e, lines, out, args):
    """floor, ceil, round_even, round_away, sqrt: one LLVM intrinsic each."""
    ty = _ty(e.args[0].dtype)
    name = {"round_even": "roundeven", "round_away": "round"}.get(e.op, e.op)
    lines.append(f"  {out} = call {ty} @llvm.{name}.{_INTRINSIC_SUFFIX[ty]}({ty} {args[0]})")
    return out


def _rsqrt(kw, e, lines, out, args):
    dt = e.args[0].dtype
    ty = _ty(dt)
    s = kw.m.ops.tmp()
    lines.append(f"  {s} = call {ty} @llvm.sqrt.{_INTRINSIC_SUFFIX[ty]}({ty} {args[0]})")
    lines.append(f"  {out} = fdiv {ty} {_lit(1.0, dt)}, {s}")
    return out


def _popcnt(kw, e, lines, out, args):
    ty = _ty(e.args[0].dtype)
    lines.append(f"  {out} = call {ty} @llvm.ctpop.{ty}({ty} {args[0]})")
    return out


def _clz(kw, e, lines, out, args):
    ty = _ty(e.args[0].dtype)
    lines.append(f"  {out} = call {ty} @llvm.ctlz.{ty}({ty} {args[0]}, i1 false)")
    return out


def _isnan(kw, e, lines, out, args):
    ty = _ty(e.args[0].dtype)
    lines.append(f"  {out} = fcmp uno {ty} {args[0]}, {args[0]}")
    return out


def _is_finite(kw, e, lines, out, args):
    dt = e.args[0].dtype
    ty = _ty(dt)
    a = kw.m.ops.tmp()
    lines.append(f"  {a} = call {ty} @llvm.fabs.{_INTRINSIC_SUFFIX[ty]}({ty} {args[0]})")
    lines.append(f"  {out} = fcmp olt {ty} {a}, {_lit(np.inf, dt)}")
    return out


def _nextafter(kw, e, lines, out, args):
    return kw.m.ops._nextafter(lines, out, e.args[0].dtype, args)


def _math(kw, e, lines, out, args):
    """The float functions of ``llvm_math`` (MATH_UNARY, pow, atan2)."""
    return kw.m.ops._math(lines, out, e.op, e.args[0].dtype, args)


CODE_FOR_OP = {
    "load": _load,
    "select": _select,
    "convert": _convert,
    "bitcast": _bitcast,
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge"), _compare),
    **dict.fromkeys(("add", "sub", "mul"), _arith),
    **dict.fromkeys(("idiv", "irem"), _index_div),
    "div": _div,
    "rem": _rem,
    **dict.fromkeys(("max", "min"), _minmax),
    **dict.fromkeys(("and", "or", "xor"), _bitwise),
    "not": _not,
    **dict.fromkeys(("shl", "shr_logical", "shr_arith"), _shift),
    "neg": _neg,
    "abs": _abs,
    "sign": _sign,
    **dict.fromkeys(("floor", "ceil", "round_even", "round_away", "sqrt"), _float_intrinsic),
    "rsqrt": _rsqrt,
    "popcnt": _popcnt,
    "clz": _clz,
    "isnan": _isnan,
    "is_finite": _is_finite,
    "nextafter": _nextafter,
    **dict.fromkeys(sorted(MATH_UNARY | {"pow", "atan2"}), _math),
}
"""Kernel op -> the function writing its instructions (``KernelRenderer.code_for_op``)."""
