"""Random programs as data, and how they are printed, run and cut down.

A :class:`Program` is a list of inputs (name, shape, dtype and how its values are drawn), a list
of :class:`Op` s, each one Python expression over earlier values (``v3 = fnp.sum(x0, axis=1)``),
and the names it returns. Because every operation is a line of source, a program *is* its
standalone repro: :meth:`Program.source` is the function the fuzzer runs, and
:meth:`Program.repro` is a script that needs only fungrad and numpy. :meth:`Program.without`
drops operations (and whatever depends on them), which is what both shrinkers work with.

Input values are not stored: they are drawn from ``(seed, input index, mode)``, so removing one
input or operation leaves every other value as it was.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap

import numpy as np

# Python names a program's source can use; a repro script imports exactly these.
PRELUDE = """\
import numpy as np
import fungrad as fg
import fungrad.lax as lax
import fungrad.nn as nn
import fungrad.numpy as fnp
import fungrad.scipy.special as special

nan, inf = float("nan"), float("inf")
"""

F32 = np.finfo(np.float32)
F64 = np.finfo(np.float64)
I32 = np.iinfo(np.int32)
I64 = np.iinfo(np.int64)

# Values with a reputation: signed zeros, infinities, NaN, the largest and smallest floats
# (denormals included), integers at the ends of their range, and ordinary small numbers.
FLOAT_SPECIALS = (
    float("nan"),
    float("inf"),
    -float("inf"),
    -0.0,
    0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    1e30,
    -1e30,
    1e-30,
    1e-40,
    -1e-45,
    88.0,
    -104.0,
    3e38,
    -3e38,
)
FLOAT32_ENDS = (float(F32.max), -float(F32.max), float(F32.tiny), float(F32.smallest_subnormal))
FLOAT64_ENDS = (float(F64.max), -float(F64.max), float(F64.tiny), 5e-324, 1e300)
INT_SPECIALS = (0, 1, -1, 2, -2, 7, 31, 32, 33, 100)
INT32_ENDS = (int(I32.min), int(I32.max), int(I32.min) + 1, int(I32.max) - 1)
INT64_ENDS = (int(I64.min), int(I64.max))


@dataclasses.dataclass(frozen=True)
class Input:
    """A program argument. ``role`` says how its values are drawn: ``"data"`` (any value,
    specials included), ``"index"`` (integers in ``[-2*bound, 2*bound]``: negative and out of
    range ones included), ``"unique"`` (distinct integers in ``[0, 2*bound)``, for scatters whose
    result is undefined under duplicate indices)."""

    name: str
    shape: tuple
    dtype: str
    role: str = "data"
    bound: int = 0


@dataclasses.dataclass(frozen=True)
class Op:
    """``out = expr``: ``expr`` is Python source over the names in ``args``. ``kind`` names the
    generator that made it; ``flags`` say what the checkers must know (``"kink"``: not smooth,
    no finite-difference check; ``"no_reverse"``: not reverse-differentiable, as JAX's
    ``while_loop``; ``"reduce"``: a sum of many terms, whose rounding depends on the order)."""

    out: str
    expr: str
    args: tuple
    kind: str
    flags: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class Program:
    inputs: tuple
    ops: tuple
    outputs: tuple
    x64: bool = False
    seed: int = 0
    special: float = 0.2

    # --- structure -------------------------------------------------------------------------

    def flags(self) -> frozenset:
        """The union of the operations' flags."""
        out = set()
        for op in self.ops:
            out |= op.flags
        return frozenset(out)

    def dtypes(self) -> set:
        return {i.dtype for i in self.inputs}

    def source(self, name: str = "f") -> str:
        """The program as a Python function returning a tuple."""
        params = ", ".join(i.name for i in self.inputs)
        lines = [f"def {name}({params}):"]
        lines += [f"    {op.out} = {op.expr}" for op in self.ops]
        lines.append(f"    return ({', '.join(self.outputs)},)")
        return "\n".join(lines) + "\n"

    def function(self, name: str = "f"):
        """The program compiled from its source (so what runs is exactly what a repro prints)."""
        namespace = namespace_for_exec()
        exec(compile(self.source(name), f"<fuzz program {self.seed}>", "exec"), namespace)
        return namespace[name]

    def without(self, drop) -> Program | None:
        """The program with the operations at indices ``drop`` removed, along with every
        operation that reads a removed value; outputs that disappear are replaced by the last
        surviving value; unused inputs are dropped. None when nothing is left."""
        gone = {self.ops[i].out for i in drop}
        ops = []
        for i, op in enumerate(self.ops):
            if i in drop or any(a in gone for a in op.args):
                gone.add(op.out)
                continue
            ops.append(op)
        outputs = tuple(o for o in self.outputs if o not in gone)
        if not outputs:
            if not ops:
                return None
            outputs = (ops[-1].out,)
        used = set(outputs)
        for op in ops:
            used |= set(op.args)
        inputs = tuple(i for i in self.inputs if i.name in used)
        if not inputs:
            return None
        return dataclasses.replace(self, inputs=inputs, ops=tuple(ops), outputs=outputs)

    # --- values ----------------------------------------------------------------------------

    def input_values(self, mode: str = "special", sample: int = 0) -> list:
        """numpy values for the inputs. ``mode="special"`` mixes in NaN, infinities, signed
            zeros, huge and denormal floats and INT_MIN/INT_MAX with probability ``self.special``;
            ``mode="tame"`` draws moderate values with in-range indices (for derivatives); an input
        of role ``"moderate"`` is in [-1, 1] in every mode.
            ``sample`` selects an independent draw (the rows of a vmap batch)."""
        return [
            draw_values(
                inp,
                np.random.default_rng([self.seed, int(inp.name[1:]), mode == "tame", sample]),
                mode,
                self.special,
            )
            for inp in self.inputs
        ]

    # --- printing --------------------------------------------------------------------------

    def repro(self, check: str, note: str = "", mode: str = "special") -> str:
        """A standalone script (fungrad and numpy only) that runs the failing check and prints
        what it compares."""
        if check.startswith("vmap"):
            rows = [self.input_values(mode, sample=k) for k in (1, 2, 3)]
            args = "\n".join(
                "    ["
                + ", ".join(array_literal(v, i.dtype) for i, v in zip(self.inputs, row))
                + "],"
                for row in rows
            )
        else:
            args = "\n".join(
                f"    {array_literal(v, inp.dtype)},  # {inp.name}"
                for inp, v in zip(self.inputs, self.input_values(mode))
            )
        header = f'"""fuzz repro (seed {self.seed}, check {check})'
        if note:
            header += "\n\n" + textwrap.indent(note.strip(), "")
        header += '\n"""\n'
        x64 = 'fg.config.update("enable_x64", True)\n' if self.x64 else ""
        return (
            header
            + PRELUDE
            + x64
            + "\n"
            + self.source()
            + "\n\nargs = [\n"
            + args
            + "\n]\n"
            + REPRO_TAILS[check]
        )


REPRO_TAILS = {
    "eager": "print(f(*args))\n",
    "jit": (
        "eager = f(*args)\ncompiled = fg.jit(f)(*args)\n"
        "for e, c in zip(eager, compiled):\n"
        "    print('eager', repr(e))\n    print('jit  ', repr(c))\n"
    ),
    "gpu": (
        "eager = f(*args)\ncompiled = fg.jit(f, backend='gpu')(*args)\n"
        "for e, c in zip(eager, compiled):\n"
        "    print('eager', repr(e))\n    print('gpu  ', repr(np.asarray(c)))\n"
    ),
    "vmap": (
        "batched = [np.stack(column) for column in zip(*args)]  # args: one row a sample\n"
        "looped = [f(*row) for row in args]\n"
        "mapped = fg.vmap(f)(*batched)\n"
        "for k, m in enumerate(mapped):\n"
        "    print('loop', repr(np.stack([np.asarray(r[k]) for r in looped])))\n"
        "    print('vmap', repr(m))\n"
    ),
}
# The scalar a gradient check differentiates: every float output against fixed weights, with
# respect to every float input (the others held at their values). Shared by the checker and the
# repro scripts, so both differentiate the same function.
LOSS_SOURCE = """\
def loss_of(f, args):
    floats = [i for i, a in enumerate(args) if np.issubdtype(np.asarray(a).dtype, np.inexact)]

    def loss(*xs):
        full = [fnp.asarray(a) for a in args]
        for i, x in zip(floats, xs):
            full[i] = fnp.asarray(x)
        total = 0.0
        for k, o in enumerate(f(*full)):
            if fnp.issubdtype(o.dtype, fnp.complexfloating):
                # a real loss of a complex output: both parts, with their own weights
                w = fnp.arange(o.size, dtype=fnp.real(o).dtype).reshape(o.shape) + k
                total = total + fnp.sum(fnp.real(o) * fnp.cos(w) + fnp.imag(o) * fnp.sin(w))
            elif fnp.issubdtype(o.dtype, fnp.floating):
                w = fnp.cos(fnp.arange(o.size, dtype=o.dtype).reshape(o.shape) + k)
                total = total + fnp.sum(o * w)
        return total

    return loss, [args[i] for i in floats]

"""


def tangent_of(x):
    """The direction derivatives are checked along (complex for a complex input)."""
    t = np.cos(np.arange(x.size) * 0.7).reshape(x.shape)
    if np.iscomplexobj(x):
        t = t + 1j * np.sin(np.arange(x.size) * 1.3).reshape(x.shape)
    return t


def widen(args):
    """float32 -> float64, complex64 -> complex128: the shadow's and derivatives' dtypes."""
    wide = {np.dtype(np.float32): np.float64, np.dtype(np.complex64): np.complex128}
    return [a.astype(wide[a.dtype]) if a.dtype in wide else a for a in args]


# (a repro script defines them too)
LOSS_SOURCE += "\n\n" + inspect.getsource(tangent_of) + "\n\n" + inspect.getsource(widen)
_GRAD_BODY = (
    "\n\nloss, xs = loss_of(f, args)\n"
    "argnums = tuple(range(len(xs)))\n"
    "eager = fg.grad(loss, argnums=argnums)(*xs)\n"
)
_GRAD_TAIL = LOSS_SOURCE + _GRAD_BODY
REPRO_TAILS["grad-jit"] = _GRAD_TAIL + (
    "compiled = fg.jit(fg.grad(loss, argnums=argnums))(*xs)\n"
    "for e, c in zip(eager, compiled):\n"
    "    print('eager grad', repr(e))\n    print('jit grad  ', repr(c))\n"
)
REPRO_TAILS["grad-gpu"] = _GRAD_TAIL + (
    "compiled = fg.jit(fg.grad(loss, argnums=argnums), backend='gpu')(*xs)\n"
    "for e, c in zip(eager, compiled):\n"
    "    print('eager grad', repr(e))\n    print('gpu grad  ', repr(np.asarray(c)))\n"
)
REPRO_TAILS["grad-fd"] = (
    "fg.config.update('enable_x64', True)\n"
    + LOSS_SOURCE
    + "\n\nargs = widen(args)"
    + _GRAD_BODY
    + "v = [tangent_of(x) for x in xs]\n"
    "h = 1e-6\n"
    "plus = loss(*[x + h * t for x, t in zip(xs, v)])\n"
    "minus = loss(*[x - h * t for x, t in zip(xs, v)])\n"
    "print('finite difference', (plus - minus) / (2 * h))\n"
    "print('grad . v         ',\n"
    "      sum(float(np.sum(np.real(np.asarray(g) * t))) for g, t in zip(eager, v)))\n"
    "print('jvp              ', fg.jvp(loss, xs, v)[1])\n"
)
REPRO_TAILS["vjp-jvp"] = REPRO_TAILS["grad-fd"]
REPRO_TAILS["vmap-jit"] = REPRO_TAILS["vmap"].replace("fg.vmap(f)", "fg.jit(fg.vmap(f))")
REPRO_TAILS["jax"] = "print(f(*args))  # JAX's result is in the note above\n"
REPRO_TAILS["grad"] = _GRAD_TAIL + "print(eager)\n"


def namespace_for_exec() -> dict:
    namespace: dict = {}
    exec(PRELUDE, namespace)
    return namespace


def array_literal(value: np.ndarray, dtype: str) -> str:
    """Source for ``value`` that rebuilds it bit for bit (floats through Python floats, which
    hold every float32/float64 exactly; NaN and inf through the names the prelude defines;
    complex numbers as (real, imag) pairs of their part dtype, viewed as complex)."""
    if np.iscomplexobj(value):
        pairs = np.stack([value.real, value.imag], -1)
        return (
            f"fnp.asarray(np.array({pairs.ravel().tolist()!r}, dtype=np.{pairs.dtype})"
            f".view(np.{dtype}).reshape({value.shape!r}))"
        )
    return (
        f"fnp.asarray(np.array({value.ravel().tolist()!r}, dtype=np.{dtype})"
        f".reshape({value.shape!r}))"
    )


def draw_values(inp: Input, rng: np.random.Generator, mode: str, special: float) -> np.ndarray:
    """Values for one input (see :meth:`Program.input_values`)."""
    shape, dtype = inp.shape, np.dtype(inp.dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if inp.role == "unique":
        hi = max(2 * inp.bound, n)
        if mode == "tame":
            hi = max(inp.bound, 1)
        vals = rng.permutation(hi)[:n] if hi >= n else np.arange(n)
        return vals.astype(dtype).reshape(shape)
    if inp.role == "moderate":
        # entries in [-1, 1] whatever the mode: linear algebra's generated matrices are built
        # well-conditioned from these (LAPACK's handling of NaN and inf is not specified)
        vals = rng.uniform(-1.0, 1.0, size=n)
        if np.issubdtype(dtype, np.complexfloating):
            vals = vals + 1j * rng.uniform(-1.0, 1.0, size=n)
        return vals.astype(dtype).reshape(shape)
    if np.issubdtype(dtype, np.complexfloating):
        part = np.float32 if dtype == np.complex64 else np.float64
        re = draw_values(dataclasses.replace(inp, dtype=np.dtype(part).name), rng, mode, special)
        im = draw_values(dataclasses.replace(inp, dtype=np.dtype(part).name), rng, mode, special)
        out = np.empty(shape, dtype)
        out.real, out.imag = re, im
        return out
    if inp.role == "index":
        b = max(inp.bound, 1)
        lo, hi = (-b, b) if mode == "tame" else (-2 * b - 1, 2 * b + 2)
        return rng.integers(lo, hi, size=n).astype(dtype).reshape(shape)
    if dtype == np.bool_:
        return (rng.random(n) < 0.5).reshape(shape)
    if np.issubdtype(dtype, np.integer):
        lo, hi = (-4, 6) if mode == "tame" else (-20, 20)
        vals = rng.integers(lo, hi, size=n).astype(dtype)
        if mode != "tame":
            ends = INT_SPECIALS + (INT64_ENDS if dtype == np.int64 else INT32_ENDS)
            hit = rng.random(n) < special
            vals[hit] = rng.choice(np.array(ends, dtype=dtype), size=int(hit.sum()))
        return vals.reshape(shape)
    if mode == "tame":
        return rng.uniform(-2.0, 2.0, size=n).astype(dtype).reshape(shape)
    scale = rng.choice([1.0, 1.0, 1.0, 100.0, 1e-3, 1e6])
    vals = (rng.standard_normal(n) * scale).astype(dtype)
    if rng.random() < 0.3:  # duplicates: values drawn from a small pool
        vals = rng.choice(vals[: max(1, n // 3)], size=n) if n else vals
    ends = FLOAT_SPECIALS + (FLOAT64_ENDS if dtype == np.float64 else FLOAT32_ENDS)
    hit = rng.random(n) < special
    with np.errstate(over="ignore"):
        vals[hit] = rng.choice(np.array(ends, dtype=dtype), size=int(hit.sum()))
    return vals.reshape(shape)
