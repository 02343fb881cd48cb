"""Drawing random programs.

A program grows one operation at a time: a generator (one function per family below) picks its
operands among the values so far (or adds a fresh input of a shape that fits), writes the
expression, and the operation is run eagerly on the program's values at once. That run gives the
new value's shape and dtype for the next draw, and it lets the generator leave out what
fungrad refuses (a documented TypeError/ValueError at trace time, counted in ``refused``) and the
classes of the known bugs in ``KNOWN_ISSUES``.

Choices go through a :class:`Chooser`: :class:`RandomChooser` (the long run, reproducible from a
seed) or :class:`DrawChooser` (hypothesis, which then shrinks a failing program's choices).
"""

from __future__ import annotations

import abc
import collections
import contextlib
import random

import numpy as np

import fungrad as fg
from tests.fuzz.program import Input, Op, Program, namespace_for_exec

MAX_SIZE = 48  # elements in any value: keeps programs fast and compiles small
# One program in ten is large, for the code paths only large arrays take (vector loops and
# their remainders, the gemm library's tiles, threads, workgroup trees on the GPU).
LARGE_SIZE = 6000
LARGE_DIMS = [1, 7, 9, 17, 33, 64, 100, 130]
MAX_OPS = 7

# Known bugs not fixed yet. While one is listed here the generator does not produce its exact
# class, so the CI test stays green; remove an entry when its fix lands (issue 15's list was
# excluded this way while it was being fixed; all of it is fixed now). Each key is checked by
# name in this module or in check.py.
KNOWN_ISSUES: dict[str, str] = {
    # Found by this fuzzer (tests/fuzz/found.md), not fixed yet.
}


class Chooser(abc.ABC):
    """Where a generator's choices come from."""

    @abc.abstractmethod
    def integer(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""

    def choice(self, seq):
        seq = list(seq)
        return seq[self.integer(0, len(seq) - 1)]

    def chance(self, percent: int) -> bool:
        """True with the given probability; shrinks towards True."""
        return self.integer(0, 99) < percent


class RandomChooser(Chooser):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DrawChooser(Chooser):
    """Choices drawn from hypothesis' ``data`` (its shrinker then simplifies programs)."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


@contextlib.contextmanager
def x64_mode(on: bool):
    old = fg.config.enable_x64
    fg.config.update("enable_x64", on)
    try:
        yield
    finally:
        fg.config.update("enable_x64", old)


def kind_of(dtype) -> str:
    """'f', 'c' (complex), 'i' or 'b'."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "b"
    if np.issubdtype(dtype, np.complexfloating):
        return "c"
    return "f" if np.issubdtype(dtype, np.floating) else "i"


class Builder:
    """A program being drawn: its inputs, operations and the eager value of each name."""

    def __init__(self, ch: Chooser, x64: bool, seed: int, special: float):
        self.ch, self.x64, self.seed, self.special = ch, x64, seed, special
        self.max_size = MAX_SIZE
        self.inputs: list = []
        self.ops: list = []
        self.values: dict = {}
        self.refused: collections.Counter = collections.Counter()
        self.crashes: list = []  # (expression, exception) where eager fungrad crashed

    # --- values ----------------------------------------------------------------------------

    def program(self, outputs=()) -> Program:
        return Program(
            tuple(self.inputs), tuple(self.ops), tuple(outputs), self.x64, self.seed, self.special
        )

    def float_dtype(self) -> str:
        return self.ch.choice(["float32", "float64", "float64"]) if self.x64 else "float32"

    def complex_dtype(self) -> str:
        if not self.x64:
            return "complex64"
        return self.ch.choice(["complex64", "complex128", "complex128"])

    def int_dtype(self) -> str:
        return self.ch.choice(["int32", "int64", "int64"]) if self.x64 else "int32"

    def new_input(self, shape, dtype, role="data", bound=0) -> str:
        inp = Input(f"x{len(self.inputs)}", tuple(int(d) for d in shape), dtype, role, bound)
        self.inputs.append(inp)
        value = self.program().input_values("special")[-1]
        self.values[inp.name] = fg.numpy.asarray(value)
        return inp.name

    def names(self, pred=lambda v: True, complex_ok: bool = False) -> list:
        """Values satisfying ``pred``; complex ones only for the generators that handle them
        (``complex_ok``): the real families' tables know float, int and bool."""
        return [
            n for n, v in self.values.items() if pred(v) and (complex_ok or kind_of(v.dtype) != "c")
        ]

    def pick(self, pred=lambda v: True, complex_ok: bool = False):
        names = self.names(pred, complex_ok)
        return self.ch.choice(names) if names else None

    def shape(self, name) -> tuple:
        return tuple(self.values[name].shape)

    def dtype(self, name) -> np.dtype:
        return np.dtype(self.values[name].dtype)

    # --- growing ---------------------------------------------------------------------------

    def add(self, expr: str, args, kind: str, flags=()) -> str | None:
        """Run ``expr`` eagerly; keep it as an operation when fungrad accepts it and the result
        is small."""
        name = f"v{len(self.inputs) + len(self.ops)}"
        namespace = namespace_for_exec()
        namespace.update(self.values)
        try:
            with np.errstate(all="ignore"):
                value = eval(expr, namespace)
        except (TypeError, ValueError, IndexError) as e:
            self.refused[f"{kind}: {type(e).__name__}: {str(e)[:80]}"] += 1
            return None
        except Exception as e:  # noqa: BLE001 - anything else is an eager crash to report
            self.crashes.append((expr, e))
            return None
        if not hasattr(value, "shape") or np.prod(value.shape) > self.max_size:
            return None
        self.values[name] = value
        args = tuple(a for a in args if a in self.values)  # Python literals are not values
        self.ops.append(Op(name, expr, args, kind, frozenset(flags)))
        return name


def broadcastable(a: tuple, b: tuple, max_size: int = MAX_SIZE) -> bool:
    try:
        out = np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return int(np.prod(out)) <= max_size


def draw_shape(ch: Chooser, max_ndim: int = 3, large: bool = False) -> tuple:
    ndim = ch.choice([0, 1, 1, 2, 2, 3][: max_ndim * 2])
    if large:
        ndim = max(ndim, 1)
        dims = []
        for _ in range(ndim):
            room = LARGE_SIZE // max(1, int(np.prod(dims)))
            dims.append(ch.choice([d for d in LARGE_DIMS if d <= room] or [1]))
        return tuple(dims)
    return tuple(
        ch.choice([1, 2, 3, 4, 5, 2, 3, 0] if ch.chance(15) else [1, 2, 3, 4, 5, 2, 3])
        for _ in range(ndim)
    )


def compatible_shape(ch: Chooser, shape: tuple) -> tuple:
    """A shape that broadcasts against ``shape``: leading axes dropped, some axes set to 1."""
    drop = ch.integer(0, len(shape))
    return tuple(1 if ch.chance(30) else d for d in shape[drop:])


def partner(b: Builder, a: str, kinds="fib") -> str:
    """A second operand for an elementwise op on ``a``: an existing value that broadcasts, a
    fresh input or a Python scalar (weakly typed)."""
    sa = b.shape(a)
    r = b.ch.integer(0, 9)
    if r < 4:
        other = b.pick(
            lambda v: broadcastable(sa, tuple(v.shape), b.max_size) and kind_of(v.dtype) in kinds
        )
        if other is not None:
            return other
    if r < 6:
        k = kind_of(b.dtype(a))
        return {
            "f": b.ch.choice(["2.0", "0.5", "-1.0", "0.0", "1e30", "3"]),
            "i": b.ch.choice(["3", "-1", "0", "2147483647"]),
            "b": b.ch.choice(["True", "False"]),
        }[k]
    dtype = (
        b.dtype(a).name
        if b.ch.chance(70)
        else b.ch.choice(
            {"f": [b.float_dtype()], "i": [b.int_dtype()], "b": ["bool"]}[b.ch.choice(kinds)]
        )
    )
    return b.new_input(compatible_shape(b.ch, sa), dtype)


# --- families ----------------------------------------------------------------------------------

UNARY_F = {  # name -> flags
    "fnp.sin": (),
    "fnp.cos": (),
    "fnp.tan": (),
    "fnp.exp": (),
    "fnp.log": (),
    "fnp.sqrt": (),
    "fnp.tanh": (),
    "fnp.abs": ("kink",),
    "fnp.negative": (),
    "fnp.floor": ("kink",),
    "fnp.ceil": ("kink",),
    "fnp.round": ("kink",),
    "fnp.sign": ("kink",),
    "fnp.expm1": (),
    "fnp.log1p": (),
    "nn.sigmoid": (),
    "fnp.reciprocal": (),
    "fnp.square": (),
    "fnp.arctan": (),
    "fnp.sinh": (),
    "fnp.cosh": (),
    "fnp.arcsinh": (),
    "fnp.arcsin": (),
    "fnp.arccos": (),
    "fnp.arctanh": (),
    "fnp.arccosh": (),
    "special.erf": (),
    "special.erfc": (),
    "fnp.cbrt": (),
    "fnp.exp2": (),
    "fnp.log2": (),
    "fnp.log10": (),
    "nn.relu": ("kink",),
    "nn.softplus": (),
    "nn.gelu": (),
    "lax.rsqrt": (),
    "special.gammaln": ("abs_error",),
    "special.erfinv": (),
    "fnp.trunc": ("kink",),
    "nn.silu": (),
    "fnp.isnan": ("kink",),
    "fnp.isinf": ("kink",),
    "fnp.isfinite": ("kink",),
    "fnp.signbit": ("kink",),
    "special.digamma": ("no_grad_known", "abs_error"),
    "lax.stop_gradient": ("kink", "no_fd"),
    "fnp.deg2rad": (),
    "nn.log_sigmoid": (),
    "special.ndtr": (),
    "special.log_ndtr": (),
}
UNARY_I = [
    "fnp.negative",
    "fnp.abs",
    "fnp.bitwise_not",
    "fnp.sign",
    "fnp.square",
    "lax.population_count",
    "lax.clz",
]
UNARY_B = ["fnp.logical_not", "fnp.bitwise_not"]


def gen_unary(b: Builder):
    a = b.pick()
    k = kind_of(b.dtype(a))
    if k == "f":
        fn = b.ch.choice(sorted(UNARY_F))
        flags = UNARY_F[fn]
        if fn == "fnp.signbit":
            # The sign of a NaN an operation makes is implementation-defined (IEEE 754).
            return b.add(f"fnp.signbit(fnp.where(fnp.isnan({a}), 0.0, {a}))", [a], "unary", flags)
        if fn in ("fnp.sin", "fnp.cos", "fnp.tan") and "sincos_big" in KNOWN_ISSUES:
            v = np.asarray(b.values[a])
            if np.any(np.abs(v[np.isfinite(v)]) > 2.0**24):
                return None
    else:
        fn, flags = b.ch.choice(UNARY_I if k == "i" else UNARY_B), ("kink",)
    return b.add(f"{fn}({a})", [a], "unary", flags)


BINARY_F = [
    "fnp.add",
    "fnp.subtract",
    "fnp.multiply",
    "fnp.divide",
    "fnp.maximum",
    "fnp.minimum",
    "fnp.arctan2",
    "fnp.power",
    "fnp.remainder",
    "fnp.fmod",
    "fnp.copysign",
    "fnp.hypot",
    "fnp.logaddexp",
    "fnp.nextafter",
    "fnp.fmax",
    "fnp.fmin",
    "fnp.floor_divide",
    "+",
    "-",
    "*",
    "/",
    "**",
]
KINKED = {
    "fnp.maximum",
    "fnp.minimum",
    "fnp.remainder",
    "fnp.fmod",
    "fnp.copysign",
    "fnp.nextafter",
    "fnp.fmax",
    "fnp.fmin",
    "fnp.floor_divide",
    "fnp.power",
    "**",
}
BINARY_I = [
    "fnp.add",
    "fnp.subtract",
    "fnp.multiply",
    "fnp.maximum",
    "fnp.minimum",
    "fnp.bitwise_and",
    "fnp.bitwise_or",
    "fnp.bitwise_xor",
    "fnp.left_shift",
    "fnp.right_shift",
    "+",
    "-",
    "*",
    "//",
    "%",
    "&",
    "|",
    "^",
]
BINARY_B = ["fnp.logical_and", "fnp.logical_or", "fnp.logical_xor", "&", "|", "^", "=="]
COMPARE = [
    "fnp.less",
    "fnp.less_equal",
    "fnp.equal",
    "fnp.not_equal",
    "fnp.greater",
    "fnp.greater_equal",
    "<",
    "<=",
    "==",
    "!=",
    ">",
    ">=",
]


def binary_expr(fn: str, a: str, c: str) -> str:
    return f"({a} {fn} {c})" if not fn[0].isalpha() else f"{fn}({a}, {c})"


def gen_binary(b: Builder):
    a = b.pick()
    k = kind_of(b.dtype(a))
    if b.ch.chance(20):
        fn, c = b.ch.choice(COMPARE), partner(b, a)
        flags = (
            ("kink", "gpu_known")
            if k == "b" or c in ("True", "False") or (c in b.values and kind_of(b.dtype(c)) == "b")
            else ("kink",)
        )
        return b.add(binary_expr(fn, a, c), [x for x in (a, c) if x in b.values], "compare", flags)
    if k == "f":
        fn = b.ch.choice(BINARY_F)
        c = partner(b, a, "fi" if b.ch.chance(20) else "f")
        if fn in ("fnp.power", "**") and c in b.values and kind_of(b.dtype(c)) == "i":
            # JAX (and fungrad) raise to a concrete integer exponent exactly but convert a
            # traced one to float (2**31 - 1 becomes even): beyond 2**24 eager and jit differ
            # by design.
            return b.add(
                binary_expr(fn, a, f"fnp.clip({c}, -2**24, 2**24)"), [a, c], "binary", ("kink",)
            )
        flags = ("kink",) if fn in KINKED else ()
        if fn == "fnp.nextafter":
            flags = ("kink", "no_reverse")  # no derivative rule, as in JAX
        if fn == "fnp.copysign" and c in b.values:
            # The sign of a NaN an operation makes is implementation-defined (IEEE 754):
            # numpy's arccos(2) is +NaN, XLA's and fungrad's compiled one -NaN (seed 318533).
            return b.add(
                f"fnp.copysign({a}, fnp.where(fnp.isnan({c}), 0.0, {c}))", [a, c], "binary", flags
            )
    elif k == "i":
        fn = b.ch.choice(BINARY_I)
        c = partner(b, a, "i")
        flags = ("kink", "gpu_known") if "shift" in fn else ("kink",)
        if fn in ("//", "%"):
            # Integer division by zero is implementation-defined in XLA: keep divisors nonzero.
            return b.add(f"({a} {fn} fnp.where({c} == 0, 1, {c}))", [a, c], "binary", flags)
    else:
        fn, c, flags = b.ch.choice(BINARY_B), partner(b, a, "b"), ("kink",)
    if b.x64 and "x64_bool_int_promotion" in KNOWN_ISSUES and c in b.values:
        if kind_of(b.dtype(a)) != kind_of(b.dtype(c)):
            return None
    return b.add(binary_expr(fn, a, c), [x for x in (a, c) if x in b.values], "binary", flags)


def gen_where_clip(b: Builder):
    a = b.pick()
    if b.ch.chance(50) or kind_of(b.dtype(a)) == "b":
        c = partner(b, a, "fib")
        cond = b.pick(
            lambda v: kind_of(v.dtype) == "b" and broadcastable(b.shape(a), v.shape, b.max_size)
        )
        cond = cond or f"({a} > 0)"
        args = [x for x in (cond, a, c) if x in b.values]
        return b.add(f"fnp.where({cond}, {a}, {c})", args, "where", ("kink",))
    lo = b.ch.choice(["-1", "0", "-2.5", "None"])
    hi = b.ch.choice(["1", "3", "0.5", "None"]) if lo != "None" else "2"
    if kind_of(b.dtype(a)) == "i" and "." in lo + hi:
        lo, hi = "-1", "2"
    return b.add(f"fnp.clip({a}, {lo}, {hi})", [a], "clip", ("kink",))


def gen_astype(b: Builder):
    a = b.pick()
    k = kind_of(b.dtype(a))
    if k == "f":
        if b.ch.chance(50):
            # Float -> int of NaN or out of range values is implementation-defined: clip first.
            expr = f"fnp.nan_to_num(fnp.clip({a}, -2e9, 2e9)).astype(int)"
        else:
            expr = f"{a}.astype(bool)"
    else:
        expr = f"{a}.astype({b.ch.choice(['float', 'float', 'bool' if k == 'i' else 'int'])})"
    return b.add(expr, [a], "astype", ("kink",))


def draw_axes(ch: Chooser, ndim: int, single: bool = False):
    if ndim == 0:
        return "None"
    if single or ch.chance(50):
        return repr(ch.integer(-ndim, ndim - 1)) if not ch.chance(20) or single else "None"
    axes = sorted({ch.integer(0, ndim - 1) for _ in range(ch.integer(1, ndim))})
    return repr(tuple(axes))


REDUCE = {
    "fnp.sum": "fib",
    "fnp.prod": "fi",
    "fnp.max": "fib",
    "fnp.min": "fib",
    "fnp.mean": "fi",
    "fnp.any": "fib",
    "fnp.all": "fib",
    "fnp.var": "f",
    "fnp.std": "f",
    "nn.logsumexp": "f",
    "fnp.count_nonzero": "fib",
    "fnp.ptp": "fi",
    "fnp.nansum": "f",
    "fnp.nanmax": "f",
    "fnp.median": "f",
}


def gen_reduce(b: Builder):
    a = b.pick()
    k = kind_of(b.dtype(a))
    fn = b.ch.choice(sorted(n for n, kinds in REDUCE.items() if k in kinds))
    axes = draw_axes(b.ch, len(b.shape(a)))
    keep = b.ch.choice(["False", "True"])
    if fn == "fnp.median" and keep == "True" and axes == "None":
        keep = "False"  # known: median keepdims of 0-d refused
    empty_mean = fn in ("fnp.mean", "fnp.var", "fnp.std") and 0 in b.shape(a)
    gpu_known = ["gpu_known"] if empty_mean else []
    flags = (
        ["reduce"]
        + gpu_known
        + (
            ["kink"]
            if fn not in ("fnp.sum", "fnp.mean", "nn.logsumexp", "fnp.var", "fnp.std", "fnp.nansum")
            else []
        )
    )
    return b.add(f"{fn}({a}, axis={axes}, keepdims={keep})", [a], "reduce", flags)


def gen_argreduce(b: Builder):
    a = b.pick()
    fns = ["fnp.argmax", "fnp.argmin"]
    if kind_of(b.dtype(a)) == "f":
        fns += ["fnp.nanargmax", "fnp.nanargmin"]
    fn = b.ch.choice(fns)
    axis = draw_axes(b.ch, len(b.shape(a)), single=True) if b.ch.chance(70) else "None"
    keep = b.ch.choice(["False", "True"])
    flags = ("kink", "gpu_bool_arg") if kind_of(b.dtype(a)) == "b" else ("kink",)
    return b.add(f"{fn}({a}, axis={axis}, keepdims={keep})", [a], "argreduce", flags)


def gen_cumulative(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0)
    if a is None:
        return None
    k = kind_of(b.dtype(a))
    axis = b.ch.integer(-len(b.shape(a)), len(b.shape(a)) - 1)
    fns = ["fnp.cumsum", "fnp.cumprod", "lax.cummax", "lax.cummin"]
    if k == "f":
        fns += ["lax.cumlogsumexp", "fnp.nancumsum"]
    if k == "b":
        fns = ["fnp.cumsum"]
    fn = b.ch.choice(fns)
    if fn.startswith("lax."):
        axis = axis % len(b.shape(a))
        rev = b.ch.choice(["False", "True"])
        return b.add(
            f"{fn}({a}, axis={axis}, reverse={rev})",
            [a],
            "cumulative",
            ("reduce", "kink") if fn != "lax.cumlogsumexp" else ("reduce",),
        )
    return b.add(
        f"{fn}({a}, axis={axis})",
        [a],
        "cumulative",
        ("reduce",) if fn == "fnp.cumsum" else ("reduce", "kink"),
    )


def factor_shape(ch: Chooser, size: int) -> tuple:
    if size == 0:
        return ch.choice([(0,), (0, 3), (2, 0), (1, 0, 1)])
    dims = []
    while size > 1 and len(dims) < 3:
        divisors = [d for d in range(2, size + 1) if size % d == 0]
        d = ch.choice(divisors)
        dims.append(d)
        size //= d
    if size > 1:
        dims.append(size)
    if ch.chance(30):
        dims.insert(ch.integer(0, len(dims)), 1)
    return tuple(dims)


def gen_shape(b: Builder):
    a = b.pick(complex_ok=True)
    s = b.shape(a)
    nd = len(s)
    r = b.ch.integer(0, 13)
    if r == 0:
        new = factor_shape(b.ch, int(np.prod(s)))
        if new and b.ch.chance(30) and np.prod(s) > 0:
            new = tuple(-1 if i == 0 else d for i, d in enumerate(new))
        return b.add(f"fnp.reshape({a}, {new!r})", [a], "reshape")
    if r == 1 and nd:
        perm = list(range(nd))
        for i in range(nd - 1, 0, -1):
            j = b.ch.integer(0, i)
            perm[i], perm[j] = perm[j], perm[i]
        return b.add(f"fnp.transpose({a}, {tuple(perm)!r})", [a], "transpose")
    if r == 2:
        return b.add(f"fnp.expand_dims({a}, {b.ch.integer(-nd - 1, nd)})", [a], "expand_dims")
    if r == 3 and 1 in s:
        return b.add(f"fnp.squeeze({a}, {s.index(1)})", [a], "squeeze")
    if r == 4:
        target = tuple(d if d != 1 else b.ch.choice([1, 2, 3]) for d in s)
        if b.ch.chance(50):
            target = (b.ch.choice([1, 2]),) + target
        return b.add(f"fnp.broadcast_to({a}, {target!r})", [a], "broadcast_to")
    if r == 5 and nd:
        return b.add(f"fnp.flip({a}, {draw_axes(b.ch, nd)})", [a], "flip")
    if r == 6:
        return b.add(f"fnp.ravel({a})", [a], "ravel")
    if r == 7 and nd:
        shift = b.ch.integer(-7, 7)
        return b.add(
            f"fnp.roll({a}, {shift}, axis={draw_axes(b.ch, nd, single=True)})", [a], "roll"
        )
    if r == 8 and nd:
        axis = b.ch.integer(-nd, nd - 1)
        other = b.pick(
            lambda v: (
                len(v.shape) == nd
                and v.dtype == b.dtype(a)
                and all(x == y for i, (x, y) in enumerate(zip(v.shape, s)) if i != axis % nd)
            )
        )
        other = other or a
        return b.add(f"fnp.concatenate([{a}, {other}], axis={axis})", [a, other], "concatenate")
    if r == 9:
        other = b.pick(lambda v: tuple(v.shape) == s and v.dtype == b.dtype(a)) or a
        axis = b.ch.integer(-nd - 1, nd)
        return b.add(f"fnp.stack([{a}, {other}], axis={axis})", [a, other], "stack")
    if r == 10 and nd:
        pads = tuple((b.ch.integer(0, 2), b.ch.integer(0, 2)) for _ in range(nd))
        mode = b.ch.choice(["'constant'", "'edge'", "'reflect'", "'wrap'"])
        return b.add(f"fnp.pad({a}, {pads!r}, mode={mode})", [a], "pad")
    if r == 11 and nd:
        reps = b.ch.integer(0, 3)
        axis = draw_axes(b.ch, nd, single=True)
        return b.add(f"fnp.repeat({a}, {reps}, axis={axis})", [a], "repeat")
    if r == 12 and nd >= 2:
        fn = b.ch.choice(["fnp.triu", "fnp.tril", "fnp.diagonal", "fnp.trace"])
        return b.add(f"{fn}({a})", [a], "matrix", ("reduce",) if fn == "fnp.trace" else ())
    if r == 13 and nd >= 2:
        return b.add(f"fnp.swapaxes({a}, 0, {nd - 1})", [a], "swapaxes")
    return None


def draw_slice(ch: Chooser, n: int) -> str:
    r = ch.integer(0, 5)
    if r == 0:
        return ":"
    if r == 1 and n:
        return repr(ch.integer(-n, n - 1))
    if r == 2:
        return "None"
    start = ch.choice(["", str(ch.integer(-n - 2, n + 2))])
    stop = ch.choice(["", str(ch.integer(-n - 2, n + 2))])
    step = ch.choice(["", "2", "-1", "-2", "3"])
    return f"{start}:{stop}" + (f":{step}" if step else "")


def gen_slice(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0, complex_ok=True)
    if a is None:
        return None
    s = b.shape(a)
    if b.ch.chance(25):
        axis = b.ch.integer(0, len(s) - 1)
        size = b.ch.integer(0, s[axis])
        start = b.ch.integer(-3, s[axis] + 3)
        return b.add(
            f"lax.dynamic_slice_in_dim({a}, {start}, {size}, axis={axis})", [a], "dynamic_slice"
        )
    idx = [draw_slice(b.ch, n) for n in s[: b.ch.integer(1, len(s))]]
    if b.ch.chance(15):
        idx.insert(0, "...")
    return b.add(f"{a}[{', '.join(idx)}]", [a], "slice")


def gen_gather(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0)
    if a is None:
        return None
    s = b.shape(a)
    n = s[0]
    idx_shape = b.ch.choice([(), (3,), (2,), (4,), (2, 2), (0,)])
    r = b.ch.integer(0, 4)
    idx = b.new_input(idx_shape, b.int_dtype(), "index", n)
    if r == 0:
        return b.add(f"{a}[{idx}]", [a, idx], "gather", ("gather",))
    if r == 1:
        mode = b.ch.choice(["'clip'", "'fill'", "'wrap'"])
        axis = b.ch.integer(0, len(s) - 1)
        idx = b.new_input(idx_shape, b.int_dtype(), "index", s[axis])
        return b.add(
            f"fnp.take({a}, {idx}, axis={axis}, mode={mode})", [a, idx], "take", ("gather",)
        )
    if r == 2:
        axis = b.ch.integer(0, len(s) - 1)
        ishape = tuple(b.ch.choice([1, 2, 3]) if i == axis else d for i, d in enumerate(s))
        idx = b.new_input(ishape, b.int_dtype(), "index", s[axis])
        return b.add(
            f"fnp.take_along_axis({a}, {idx}, axis={axis})",
            [a, idx],
            "take_along_axis",
            ("gather",),
        )
    method = b.ch.choice(["add", "add", "mul", "min", "max", "set", "get"])
    if method in ("set",):
        idx = b.new_input(idx_shape, b.int_dtype(), "unique", n)
    upd_shape = idx_shape + s[1:]
    if b.ch.chance(30):
        upd = {"f": "1.5", "i": "2", "b": "True"}[kind_of(b.dtype(a))]
    else:
        upd = b.new_input(compatible_shape(b.ch, upd_shape), b.dtype(a).name)
    if method == "get":
        mode = b.ch.choice(["'fill'", "'clip'", "'drop'", "'promise_in_bounds'"])
        if mode == "'promise_in_bounds'":
            return None  # out-of-bounds indices there are undefined behaviour (JAX docs)
        return b.add(f"{a}.at[{idx}].get(mode={mode})", [a, idx], "gather", ("gather",))
    if kind_of(b.dtype(a)) == "b" and method in ("add", "mul"):
        return None
    args = [x for x in (a, idx, upd) if x in b.values]
    flags = ("kink",) if method in ("min", "max") else ()
    if method == "mul" and upd in b.values:
        # JAX differentiates scatter-mul with respect to its updates only for unique indices.
        flags = ("kink", "no_reverse")
    return b.add(f"{a}.at[{idx}].{method}({upd})", args, "scatter", flags)


def gen_dot(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0 and kind_of(v.dtype) != "b")
    if a is None:
        return None
    s = b.shape(a)
    dtype = b.dtype(a).name
    r = b.ch.integer(0, 3)
    if r == 0 or len(s) == 1:
        m = b.ch.choice([None, 1, 2, 3])
        c = b.new_input((s[-1],) if m is None else (s[-1], m), dtype)
        fn = b.ch.choice(["@", "fnp.dot", "fnp.matmul"])
        return b.add(binary_expr(fn, a, c), [a, c], "dot", ("reduce",))
    if r == 1:
        c = b.new_input(s[:-2] + (s[-1], b.ch.choice([1, 2, 3])), dtype)
        return b.add(f"fnp.matmul({a}, {c})", [a, c], "dot", ("reduce",))
    if r == 2:
        c = b.new_input(
            (s[-1],) + tuple(b.ch.choice([1, 2]) for _ in range(b.ch.integer(0, 1))), dtype
        )
        return b.add(f"fnp.tensordot({a}, {c}, axes=1)", [a, c], "dot", ("reduce",))
    letters = "abcd"[: len(s)]
    other = "".join(ch for ch in letters if b.ch.chance(60)) + b.ch.choice(["", "e"])
    cshape = tuple(s[letters.index(ch)] if ch in letters else 2 for ch in other)
    c = b.new_input(cshape, dtype)
    union = sorted(set(letters + other))
    out = "".join(ch for ch in union if b.ch.chance(50))
    if "einsum_bool_inf" in KNOWN_ISSUES:
        vals = [np.asarray(b.values[x]) for x in (a, c)]
        if any(np.issubdtype(v.dtype, np.floating) and not np.all(np.isfinite(v)) for v in vals):
            return None
    return b.add(f"fnp.einsum('{letters},{other}->{out}', {a}, {c})", [a, c], "einsum", ("reduce",))


def gen_sort(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0)
    if a is None:
        return None
    nd = len(b.shape(a))
    axis = b.ch.integer(-nd, nd - 1)
    r = b.ch.integer(0, 3)
    if r == 0:
        return b.add(f"fnp.sort({a}, axis={axis})", [a], "sort", ("kink", "sort"))
    if r == 1:
        return b.add(f"fnp.argsort({a}, axis={axis})", [a], "argsort", ("kink", "sort"))
    if r == 2 and kind_of(b.dtype(a)) != "b":
        k = b.ch.integer(0, b.shape(a)[-1])
        # top_k orders NaNs by their sign (as XLA's), and the sign of a produced NaN is open:
        # NaNs enter it as +NaN
        src = f"fnp.where(fnp.isnan({a}), nan, {a})" if kind_of(b.dtype(a)) == "f" else a
        return b.add(f"lax.top_k({src}, {k})[{b.ch.integer(0, 1)}]", [a], "top_k", ("kink", "sort"))
    c = b.pick(lambda v: tuple(v.shape) == b.shape(a)) or a
    return b.add(
        f"lax.sort(({a}, {c}), dimension={axis % nd}, num_keys=1)[1]",
        [a, c],
        "lax.sort",
        ("kink", "sort"),
    )


BODIES = {  # one-argument bodies for control flow, by dtype kind
    "f": [
        "fnp.sin(o)",
        "o * 2.0",
        "o - 1.0",
        "fnp.exp(-fnp.abs(o))",
        "fnp.tanh(o) + o",
        "o",
        "o * o",
    ],
    "i": ["o + 1", "o * 3", "-o", "o", "o ^ 5"],
    "b": ["~o", "o"],
}


def gen_control(b: Builder):
    a = b.pick()
    k = kind_of(b.dtype(a))
    body = lambda: b.ch.choice(BODIES[k])  # noqa: E731
    r = b.ch.integer(0, 4)
    if r == 0:
        # a float sum's rounding depends on its order (jit's is blocked and pairwise), so a
        # predicate on one could flip with cancellation; any(a > 0) is exact
        pred = f"fnp.any({a} > 0)" if k == "f" else f"fnp.sum({a}) > 0"
        return b.add(
            f"lax.cond({pred}, lambda o: {body()}, lambda o: {body()}, {a})", [a], "cond", ("kink",)
        )
    if r == 1:
        n = b.ch.integer(0, 4)
        step = {"f": "{} * 0.5 + i", "i": "{} + i.astype(o.dtype)", "b": "{} ^ (i % 2 == 0)"}[k]
        return b.add(
            f"lax.fori_loop(0, {n}, lambda i, o: {step.format(body())}, {a})", [a], "fori_loop"
        )
    if r == 2:
        n = b.ch.integer(0, 4)
        cond = "s[0] < " + str(n)
        if k == "f" and b.ch.chance(50):
            cond = f"(s[0] < 6) & (fnp.sum(fnp.abs(s[1])) < {b.ch.choice(['10.0', '1e3'])})"
        return b.add(
            f"lax.while_loop(lambda s: {cond}, lambda s: (s[0] + 1, "
            f"{body().replace('o', 's[1]')}), (0, {a}))[1]",
            [a],
            "while_loop",
            ("no_reverse", "kink"),
        )
    if r == 3 and b.shape(a):
        scan = {"f": "(c * 0.5 + x, fnp.sin(c) + x)", "i": "(c + x, c * x)", "b": "(c ^ x, c & x)"}[
            k
        ]
        rev = b.ch.choice(["False", "True"])
        which = b.ch.integer(0, 1)
        return b.add(
            f"lax.scan(lambda c, x: {scan}, fnp.zeros({a}.shape[1:], {a}.dtype), "
            f"{a}, reverse={rev})[{which}]",
            [a],
            "scan",
            ("reduce",),
        )
    if r == 4:
        flags = ("kink", "gpu_bool_arg") if k == "b" else ("kink",)
        return b.add(
            f"lax.switch(fnp.argmax({a}.ravel()) % 3 if {a}.size else 0, "
            f"[lambda o: {body()}, lambda o: {body()}, lambda o: {body()}], {a})",
            [a],
            "switch",
            flags,
        )
    return None


FAMILIES = [
    (gen_unary, 6),
    (gen_binary, 6),
    (gen_where_clip, 2),
    (gen_astype, 1),
    (gen_reduce, 4),
    (gen_argreduce, 1),
    (gen_cumulative, 1),
    (gen_shape, 4),
    (gen_slice, 2),
    (gen_gather, 3),
    (gen_dot, 2),
    (gen_sort, 1),
    (gen_control, 2),
]
FAMILY_TABLE = [f for f, w in FAMILIES for _ in range(w)]


def draw_program(
    ch: Chooser, seed: int, x64: bool | None = None, extended: bool | None = None
) -> tuple[Program, Builder]:
    """A random program and the builder that drew it (its ``refused`` counts what fungrad
    rejected on the way). ``extended``: whether it may draw complex numbers, the FFT and
    linear algebra (None: one program in four)."""
    if x64 is None:
        x64 = ch.chance(15)
    # One program in four also draws complex numbers, the FFT and linear algebra
    # (tests/fuzz/gen_complex.py); the others are drawn exactly as before those existed.
    drawn = ch.chance(25)
    extended = drawn if extended is None else extended
    special = ch.choice([0.0, 0.1, 0.3])
    b = Builder(ch, x64, seed, special)
    large = ch.chance(10)
    if large:
        b.max_size = LARGE_SIZE
    with x64_mode(x64):
        base = draw_shape(ch, large=large)
        table = FAMILY_TABLE
        kinds = "fffib"
        if extended:
            from tests.fuzz import gen_complex

            table, kinds = gen_complex.EXTENDED_TABLE, "fffibcc"
        for k in range(ch.integer(1, 3)):
            # (the first input is real: the real families need a value to start from)
            kind = ch.choice(kinds if k else "fffib")
            dtype = {
                "f": b.float_dtype,
                "i": b.int_dtype,
                "b": lambda: "bool",
                "c": b.complex_dtype,
            }[kind]()
            b.new_input(compatible_shape(ch, base) if b.inputs else base, dtype)
        for _ in range(ch.integer(1, MAX_OPS)):
            ch.choice(table)(b)
        # Every value no later operation reads is an output, so no operation is dead code
        # (jit would drop it untested).
        read = {a for op in b.ops for a in op.args}
        outputs = [op.out for op in b.ops if op.out not in read] or [b.inputs[0].name]
    return b.program(outputs), b
