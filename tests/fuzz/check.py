"""Running a program every way fungrad can, and comparing the results.

The reference is the program run eagerly (each primitive's numpy impl), operation by operation.
It runs twice: as drawn (``ref``) and again with float32 inputs widened to float64 under x64
(``shadow``). Where the two agree on an element's class (finite, NaN, +inf, -inf) or integer
value, that element is *stable* and is compared: integers and bools exactly, NaN and infinities
exactly by position, finite floats within

    tol = 8 |ref - shadow| + 32 eps |ref| + 4 eps slack

``|ref - shadow|`` is how far float32 rounding moved the eager result on this program and these
values, so an ill-conditioned program (cancellation, a large exponent) gets a tolerance to match;
``slack`` is ``sum(|terms|)`` of the reductions and products that produced the value (their
rounding depends on the summation order, which jit may change). Elements the shadow does not
confirm (a comparison that float32 rounding flipped, an overflow only in float32) are not
compared: the program is not stable there.

A program with no float32 input under x64 has no wider float to run in. Its shadow is the
*nudged* run instead (:func:`nudged_reference`): the program run eagerly twice more with the
float result of every operation jit may legitimately round differently (approximated math
such as ``exp`` or ``silu``, ``power``, sums, dots, scans: :func:`rounds_freely`) moved by
``NUDGE_ULPS`` ulps of random sign, element by element. Compiled and eager float64 math
differ by an ulp or two per such operation (jit's logistic is within 0.52 ulp of the
correctly rounded value, eager's within 1.4); the nudged runs carry differences of that size
through the rest of the program, so ``|ref - shadow|`` (the larger of the two runs) is how
far they can move the result: a ``tan`` near a pole, a huge exponent, a cancellation. An
element whose class or integer value a nudge changes is not stable, as above. Operations that
are correctly rounded in both (``+ - * /``, ``sqrt``, data movement, comparisons, max/min)
are not nudged, so exact values (an integer that ``floor`` keeps) stay exact. Nudging inputs
instead would overestimate after ``exp`` of a large value and underestimate after a function
that shrinks relative errors (``log`` of a large value), whose own rounding a later
ill-conditioned operation still amplifies. An error of 1e-10 relative in a well-conditioned
float64 program stays far outside the tolerance (test_fuzz.py plants one).

Checks (each a :class:`Failure` ``check`` name): ``jit`` and ``gpu`` (forward, special values),
``vmap`` (a batch of 3 against a Python loop, eager and jitted), ``grad-jit`` / ``grad-gpu``
(``jit(grad)`` against eager ``grad`` on tame values), ``vjp-jvp`` (``grad . v == jvp(v)`` in
float64) and ``grad-fd`` (``jvp`` against central differences in float64, where the
function is smooth around the point: with kinks in the program, the estimates at several step
sizes must agree).
"""

from __future__ import annotations

import dataclasses
import re
import traceback

import numpy as np

import fungrad as fg
from fungrad.array import Array
from fungrad.core import Literal
from fungrad.lowering.gpu import runtime as gpu_runtime
from tests.fuzz.gen import KNOWN_ISSUES, kind_of, x64_mode
from tests.fuzz.program import LOSS_SOURCE, Program, namespace_for_exec, tangent_of, widen

# Crashes of the known bugs in KNOWN_ISSUES, recognised by a phrase of their traceback.
# (issue 15's planner crash "list.remove(x): x not in list" and the size-0 "in unflatten" were
# listed here while they were being fixed.)
KNOWN_CRASHES: dict[str, str] = {}


@dataclasses.dataclass
class Failure:
    check: str
    message: str
    program: Program
    mode: str = "special"

    def repro(self) -> str:
        return self.program.repro(self.check, f"{self.check}: {self.message}", self.mode)


@dataclasses.dataclass
class Stats:
    """What ran: counts per check, and checks skipped with the reason."""

    ran: dict = dataclasses.field(default_factory=dict)
    skipped: dict = dataclasses.field(default_factory=dict)
    known: dict = dataclasses.field(default_factory=dict)

    def count(self, table, key):
        table[key] = table.get(key, 0) + 1


# --- running ------------------------------------------------------------------------------------


def interpret(prog: Program, values, x64: bool, nudge: np.random.Generator | None = None):
    """Run the program eagerly one operation at a time. Returns the outputs, every value by
    name (numpy), and each output's ``slack`` (see the module docstring). With ``nudge``, the
    float result of each operation that :func:`rounds_freely` is moved by ``NUDGE_ULPS`` ulps
    of a sign drawn from it, element by element (:func:`nudged_reference`)."""
    namespace = namespace_for_exec()
    env, slack = {}, {}
    with x64_mode(x64), np.errstate(all="ignore"):
        for inp, v in zip(prog.inputs, values):
            namespace[inp.name] = fg.numpy.asarray(v)
            env[inp.name], slack[inp.name] = np.asarray(v), 0.0
        for op in prog.ops:
            out = eval(op.expr, namespace)
            if nudge is not None and rounds_freely(op):
                moved = nudged(np.asarray(out), nudge)
                if moved is not None:
                    out = fg.numpy.asarray(moved)
            namespace[op.out] = out
            env[op.out] = np.asarray(out)
            slack[op.out] = op_slack(op, env, slack)
            if "linalg" in op.flags:
                slack[op.out] = max(slack[op.out], linalg_sensitivity(op, namespace, env))
    return [env[o] for o in prog.outputs], env, [slack[o] for o in prog.outputs]


# Functions whose float results the compiled code and numpy may round differently: the
# approximated ones (neither side is correctly rounded), and the sums, products, dots and
# scans whose order jit chooses. Everything else a program calls is correctly rounded or exact
# on both sides (+ - * /, sqrt, floor, max, where, data movement, comparisons).
ROUNDS_FREELY = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "tanh",
        "expm1",
        "log1p",
        "sigmoid",
        "arctan",
        "sinh",
        "cosh",
        "arcsinh",
        "arcsin",
        "arccos",
        "arctanh",
        "arccosh",
        "erf",
        "erfc",
        "cbrt",
        "exp2",
        "log2",
        "log10",
        "softplus",
        "gelu",
        "rsqrt",
        "gammaln",
        "erfinv",
        "silu",
        "digamma",
        "deg2rad",
        "log_sigmoid",
        "ndtr",
        "log_ndtr",
        "arctan2",
        "power",
        "hypot",
        "logaddexp",
        "sum",
        "prod",
        "mean",
        "var",
        "std",
        "logsumexp",
        "nansum",
        "cumsum",
        "cumprod",
        "nancumsum",
        "cumlogsumexp",
        "trace",
        "dot",
        "matmul",
        "tensordot",
        "einsum",
        "scan",
    }
)
_CALLED = re.compile(r"\b(?:fnp|nn|special|lax)\.(\w+)\(")
# (complex arithmetic, FFTs and LAPACK calls carry the flag "rounds": tests/fuzz/gen_complex.py)
_ACCUMULATING = re.compile(r"\.at\[.*\]\.(?:add|mul)\(")  # duplicates: order-dependent
NUDGE_ULPS = 2
NUDGE_RUNS = 2


def rounds_freely(op) -> bool:
    """Whether jit may round ``op``'s float result differently from eager (see above)."""
    return (
        "rounds" in op.flags
        or "**" in op.expr
        or "@" in op.expr
        or _ACCUMULATING.search(op.expr) is not None
        or not ROUNDS_FREELY.isdisjoint(_CALLED.findall(op.expr))
    )


def nudged(x: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
    """``x`` with each finite nonzero element's magnitude moved ``NUDGE_ULPS`` ulps up or
    down (a random sign; never across zero, and an element a nudge would overflow stays), or
    None when ``x`` is not float."""
    if kind_of(x.dtype) == "c" and x.size:
        out = x.copy()
        out.real, out.imag = nudged(x.real.copy(), rng), nudged(x.imag.copy(), rng)
        return out
    if kind_of(x.dtype) != "f" or x.size == 0:
        return None
    step = rng.choice(np.array([-NUDGE_ULPS, NUDGE_ULPS], x.dtype), size=x.shape)
    with np.errstate(all="ignore"):
        mag = np.abs(x)
        ulp = np.spacing(mag)
        ulp = np.where(np.isfinite(ulp), ulp, mag - np.nextafter(mag, 0))  # (the largest float)
        y = np.copysign(np.maximum(mag + step * ulp, 0), x).astype(x.dtype)
    return np.where(np.isfinite(y) & (x != 0), y, x)


def nudged_reference(prog: Program, values, ref):
    """The shadow of a program without a wider float (see the module docstring): per
    output, the nudged run that is further from ``ref`` element by element, and where
    either run changes an element's class (or an integer), that run's element, so the
    element counts as unstable."""
    runs = [
        interpret(prog, values, prog.x64, np.random.default_rng(k))[0]
        for k in range(1, NUDGE_RUNS + 1)
    ]
    out = []
    for k, r in enumerate(ref):
        r = np.asarray(r)
        worst = np.asarray(runs[0][k])
        for other in (np.asarray(run[k]) for run in runs[1:]):
            if kind_of(r.dtype) not in "fc":
                worst = np.where(worst != r, worst, other)
                continue
            with np.errstate(all="ignore"):
                moved = float_class(other) != float_class(r)
                further = np.abs(other - r) > np.abs(worst - r)
            keep = float_class(worst) != float_class(r)
            worst = np.where(~keep & (moved | further), other, worst)
        out.append(worst)
    return out


def finite_max(x) -> float:
    x = np.asarray(x)
    if x.dtype == np.bool_ or x.size == 0:
        return float(x.size > 0)
    x = np.abs(x).astype(np.float64)
    x = x[np.isfinite(x)]
    return float(x.max()) if x.size else 0.0


def backward_magnitude(grad_fn, xs) -> float:
    """The largest finite ``|value|`` among the equations of ``grad_fn``'s jaxpr at ``xs``
    (the backward pass's intermediates), evaluated eagerly one equation at a time. A gradient's
    rounding is of their size: the gradient of ``x / x`` is ``1/x - x/x**2``, two terms of
    ~19.8 at x = -0.0505 that cancel (seed 130491: jit gave one ulp of them, 1.9e-6, eager
    0), while every forward value and the gradient itself are at most 2."""
    closed = fg.make_jaxpr(grad_fn)(*xs)
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, [fg.numpy.asarray(x) for x in xs]))

    def read(v):  # (as core.eval_jaxpr reads a literal: weak types kept)
        return Array(v.val, v.aval.weak_type) if type(v) is Literal else env[v]

    big = 0.0
    for eqn in jaxpr.eqns:
        out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outvars, outs))
        big = max([big] + [finite_max(np.asarray(o)) for o in outs])
    return big


def op_slack(op, env, slack) -> float:
    """``sum(|terms|)`` bound for a reduction or product (number of terms times the largest
    term), else the largest slack among the operands."""
    inherited = max((slack[a] for a in op.args), default=0.0)
    if "abs_error" in op.flags:
        # lgamma and digamma are accurate relative to max(|f|, 1), not |f|, next to their
        # zeros (JAX's float64 gammaln is ~10 ulps off at 1.67, ours ~5)
        return max(inherited, 8.0 * max(1.0, finite_max(env[op.out])))
    if "part" in op.flags:
        # The real or imaginary part of a complex number carries rounding of the size of the
        # whole number's (the imaginary part of a Hermitian matrix's determinant is noise)
        return max(inherited, max(finite_max(env[a]) for a in op.args))
    if "special_open" in op.flags and any(
        not np.all(np.isfinite(env[a])) for a in (*op.args, op.out)
    ):
        # Complex functions of an infinite or NaN number (C99's annex G is not what JAX or
        # XLA implement: exp(-inf + nan j) is 0 in numpy, NaN in JAX; abs(nan + inf j) inf
        # and NaN), and FFTs of one (an infinity times a twiddle factor with a zero part is
        # NaN there, and which twiddles an algorithm multiplies by is its own choice): only
        # elements finite on both sides are compared, as for overflowing sums. A complex
        # result that overflows is the same: (x^2 - y^2) + 2xy i of x = y = -1.8e308 is
        # -inf + inf j in numpy (which squares specially), nan + inf j by the formula.
        return float("inf")
    if "reduce" not in op.flags or all(
        kind_of(env[a].dtype) not in "fc" for a in (*op.args, op.out)
    ):
        return inherited  # integer sums are exact (wrapping is associative too)
    sizes = [max(env[a].size, 1) for a in op.args]
    longest = max([max(env[a].shape, default=1) for a in op.args])  # a scan's length
    terms = max(float(np.prod(sizes)) / max(env[op.out].size, 1), float(longest), 1.0)
    big = float(np.prod([max(finite_max(env[a]), 1e-30) for a in op.args]))
    if "prod" in op.expr and any(product_may_overflow(env[a], terms) for a in op.args):
        return float("inf")
    if "linalg" in op.flags:
        # A factorization's rounding is of the size of its results (a determinant of a
        # matrix built from entries in [-1, 1] is in the hundreds), and LAPACK's blocked
        # algorithms and jit's order their sums differently: terms times the largest result
        big = max(big, finite_max(env[op.out]))
    return max(inherited, terms * big)


LINALG_STEP = 2.0**-20
# LAPACK's error bounds are a modest polynomial in n times eps times the condition: jit's
# 4 x 4 float64 SVD reconstructs its matrix within 2.6e-14, numpy's within 4.2e-15 (seed 2184)
LINALG_GROWTH = 16


def linalg_sensitivity(op, namespace, env) -> float:
    """How far a linear algebra result moves when its operands move by a relative
    ``LINALG_STEP`` (random signs), divided by that step, times the number of terms and
    ``LINALG_GROWTH``: its condition (an eigenvector's is the norm over the gap to the next
    eigenvalue) as slack, for LAPACK's rounding inside, which no shadow of a float64 program
    sees."""
    out = np.asarray(env[op.out])
    if kind_of(out.dtype) not in "fc" or out.size == 0 or not np.all(np.isfinite(out)):
        return 0.0
    rng = np.random.default_rng(0)
    moved = dict(namespace)
    for a in op.args:
        v = np.asarray(env[a])
        if kind_of(v.dtype) in "fc":
            step = 1 + LINALG_STEP * rng.choice([-1.0, 1.0], size=v.shape)
            moved[a] = fg.numpy.asarray((v * step).astype(v.dtype))
    try:
        other = np.asarray(eval(op.expr, moved))
    except Exception:  # noqa: BLE001 - no estimate; the other terms stand
        return 0.0
    terms = max([max(env[a].shape, default=1) for a in op.args] + [1])
    return LINALG_GROWTH * terms * finite_max(other - out) / LINALG_STEP


def product_may_overflow(x, terms: float) -> bool:
    """Whether a product of ``terms`` factors of ``x`` may overflow or underflow on the way,
    which makes its inf/NaN/0 pattern depend on the order of the factors."""
    x = np.abs(np.asarray(x)).astype(np.float64) if kind_of(np.asarray(x).dtype) in "fc" else None
    if x is None or x.size == 0:
        return False
    x = x[np.isfinite(x) & (x > 0)]
    if x.size == 0:
        return False
    fmax = float(np.finfo(np.float32).max)
    with np.errstate(all="ignore"):
        return bool(
            np.log(x.max()) * terms > np.log(fmax)
            or np.log(x.min()) * terms < np.log(np.finfo(np.float32).tiny)
        )


def reference(prog: Program, values):
    """(ref, shadow, slack, env): see the module docstring. ``shadow`` is the float64 run
    of float32 inputs, or the nudged runs where no input is float32 under x64 (there is no
    wider float) or widening changed a dtype the program depends on."""
    ref, env, slack = interpret(prog, values, prog.x64)
    shadow = None
    if not prog.x64 or any(np.asarray(v).dtype in (np.float32, np.complex64) for v in values):
        try:
            shadow = interpret(prog, widen(values), True)[0]
        except TypeError:
            pass  # x64 changed a dtype the program depends on (a loop carry)
    if shadow is None:
        shadow = nudged_reference(prog, values, ref)
    return ref, shadow, slack, env


# --- comparing ----------------------------------------------------------------------------------


def float_class(x: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +inf, 3 -inf (of each part of a complex number: 4 real + imag)."""
    if np.iscomplexobj(x):
        return 4 * float_class(x.real) + float_class(x.imag)
    return np.where(np.isnan(x), 1, np.where(x == np.inf, 2, np.where(x == -np.inf, 3, 0)))


def compare(actual, ref, shadow, slack: float, eps: float, gpu: bool = False) -> str | None:
    """None when ``actual`` matches the reference, else a description of the first mismatches."""
    actual = np.asarray(actual)
    ref = np.asarray(ref)
    if actual.shape != ref.shape:
        return f"shape {actual.shape} != reference {ref.shape}"
    if actual.dtype != ref.dtype:
        return f"dtype {actual.dtype} != reference {ref.dtype}"
    if kind_of(ref.dtype) not in "fc" and slack > 0:
        # An integer or bool computed from a float sum (astype(int) or a comparison of a
        # product): the summation order jit picks may move it across a rounding boundary.
        return None
    if kind_of(ref.dtype) not in "fc":
        stable = (
            np.ones(ref.shape, bool)
            if shadow is None
            else (np.asarray(shadow).astype(np.float64) == ref.astype(np.float64))
        )
        bad = stable & (actual != ref)
    else:
        bad = float_mismatches(actual, ref, shadow, slack, eps)
    if not bad.any():
        return None
    where = list(zip(*np.nonzero(bad)))[:4] if ref.ndim else [()]
    parts = []
    for idx in where:
        s = f"at {tuple(int(i) for i in idx)}: got {actual[idx]!r}, eager {ref[idx]!r}"
        if shadow is not None:
            s += f", float64 {np.asarray(shadow)[idx]!r}"
        parts.append(s)
    return f"{int(bad.sum())} of {ref.size} elements differ; " + "; ".join(parts)


def float_mismatches(actual, ref, shadow, slack: float, eps: float) -> np.ndarray:
    """Where float or complex ``actual`` differs from ``ref`` (see the module docstring). A
    complex element is compared part by part, each within the tolerance of the whole number
    (``|ref|``, ``|ref - shadow|``): a part much smaller than the other carries rounding of the
    size of the larger one (a product's real part ``ac - bd`` cancels)."""
    cplx = kind_of(ref.dtype) == "c"
    wide = np.complex128 if cplx else np.float64
    parts = (np.real, np.imag) if cplx else (lambda x: x,)
    part_dtype = np.real(ref).dtype
    with np.errstate(all="ignore"):
        a, r = actual.astype(wide), ref.astype(wide)
        cls = float_class(ref)
        if shadow is None:
            stable = np.ones(ref.shape, bool)
            err = np.zeros(ref.shape)
        else:
            shadow = np.asarray(shadow, wide)
            stable = float_class(shadow.astype(ref.dtype)) == cls
            err = _magnitude([finite_or_0(np.abs(p(r) - p(shadow))) for p in parts])
        mag = _magnitude([finite_or_0(np.abs(p(r))) for p in parts])
        # + tiny: results below the smallest normal number keep few significant bits
        # (the reference's special functions underflow to 0 where jit's give denormals,
        # and WGSL lets a GPU flush denormals to a zero of either sign)
        tol = 8 * err + 32 * eps * mag + 4 * eps * slack + float(np.finfo(part_dtype).tiny)
        bad_class = stable & (float_class(actual) != cls)
        overflowing = slack > float(np.finfo(part_dtype).max)
        if overflowing:
            # A sum or product whose terms can overflow: whether an element comes out
            # finite, inf or NaN depends on the order of the terms and on fused
            # multiply-adds (JAX's CPU backend contracts too), so only finite pairs count.
            bad_class &= False
        bad_value = np.zeros(ref.shape, bool)
        for p in parts:
            finite = float_class(p(r)) == 0
            if overflowing:
                finite &= float_class(p(a)) == 0
            bad_value |= finite & ~(np.abs(p(a) - p(r)) <= tol)
        return bad_class | (stable & ~bad_class & bad_value)


def _magnitude(parts: list) -> np.ndarray:
    """``|x|`` from the absolute values of x's parts (one, or real and imaginary), without
    squaring: the square of 4.8e-261 underflows to 0, which made the tolerance of every
    float64 value below ~1e-154 the smallest normal number (fuzzer seeds 180143, 180359:
    one ulp of ndtr's 4.8e-261 reported as a mismatch)."""
    return parts[0] if len(parts) == 1 else np.hypot(*parts)


def finite_or_0(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, 0.0)


def eps_for(prog: Program, dtype) -> float:
    """The rounding unit results are compared in: float32's when any float32 enters the
    program, even where its output is float64."""
    dtype = np.dtype(dtype)
    if kind_of(dtype) not in "fc":
        return 0.0
    if dtype in (np.float64, np.complex128) and not {"float32", "complex64"} & prog.dtypes():
        return float(np.finfo(np.float64).eps)
    return float(np.finfo(np.float32).eps)


def compare_all(prog, actual, ref, shadow, slacks, gpu=False) -> str | None:
    if len(actual) != len(ref):
        return f"{len(actual)} outputs, reference has {len(ref)}"
    for k, (a, r) in enumerate(zip(actual, ref)):
        s = None if shadow is None else shadow[k]
        msg = compare(a, r, s, slacks[k], eps_for(prog, np.asarray(r).dtype), gpu)
        if msg:
            return f"output {k}: {msg}"
    return None


# --- the checks ---------------------------------------------------------------------------------


def known_crash(exc: BaseException) -> str | None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for name, phrase in KNOWN_CRASHES.items():
        if phrase in text:
            return name
    return None


def crash_message(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({tb[-1].filename.rsplit('/', 2)[-1]}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{where}"


def gpu_available() -> bool:
    try:
        gpu_runtime.runtime()
    except gpu_runtime.GpuUnavailableError:
        return False
    return True


def has_denormals(v) -> bool:
    v = np.asarray(v)
    if kind_of(v.dtype) == "c":
        return has_denormals(v.real) or has_denormals(v.imag)
    if kind_of(v.dtype) != "f":
        return False
    a = np.abs(v)
    return bool(np.any((a > 0) & (a < np.finfo(v.dtype).tiny)))


TRIG = ("fnp.sin(", "fnp.cos(", "fnp.tan(")


EXP_LIKE = re.compile(r"fnp\.(?:exp|expm1|sinh|cosh|sin|cos|tan|tanh)\(")


def near_branch_cut(prog: Program, env) -> str | None:
    """Whether a complex ``log``/``sqrt``/``angle``/``log1p`` (flag ``"branch_cut"``) sees a
    computed value on or next to the negative real axis: which side of the cut an FFT's or a
    product's rounding (or the sign of a zero imaginary part) puts it on is the
    implementation's choice, and the result jumps by 2 pi i (seed 3411: ``sqrt(fft(x))`` of a
    real x, whose zero-frequency term is real)."""
    made = {op.out for op in prog.ops}
    for op in prog.ops:
        if "branch_cut" not in op.flags:
            continue
        for a in op.args:
            v = np.asarray(env[a])
            if a not in made or kind_of(v.dtype) != "c":
                continue
            eps = float(np.finfo(v.real.dtype).eps)
            with np.errstate(all="ignore"):
                close = (v.real < 0) & (np.abs(v.imag) <= 1e3 * eps * np.abs(v))
            if np.any(close):
                return "a computed value at a branch cut (implementation-defined side)"
    return None


def known_value_issue(prog: Program, env) -> str | None:
    """A known bug that these values (the eager ``env`` of a run) would hit under jit, or
    values where jit and eager may legitimately differ (:func:`near_branch_cut`)."""
    cut = near_branch_cut(prog, env)
    if cut:
        return cut
    if "complex_exp_overflow" in KNOWN_ISSUES:
        for op in prog.ops:
            if not EXP_LIKE.search(op.expr) or not any(
                kind_of(env[a].dtype) == "c" or "1j" in op.expr for a in op.args
            ):
                continue
            for a in op.args:
                v = np.asarray(env[a])
                big = 88.0 if v.dtype in (np.float32, np.complex64) else 709.0
                if finite_max(v.real) > big or finite_max(v.imag) > big:
                    return "known: " + KNOWN_ISSUES["complex_exp_overflow"]
    if "sincos_big" in KNOWN_ISSUES:
        for op in prog.ops:
            if any(t in op.expr for t in TRIG) and any(
                kind_of(env[a].dtype) == "f" and finite_max(env[a]) > 2.0**20 for a in op.args
            ):
                return "known: " + KNOWN_ISSUES["sincos_big"]
    return None


def gpu_eligible(prog: Program, env) -> str | None:
    """Why the GPU check is skipped for this program, or None."""
    if prog.x64 or any(i.dtype in ("float64", "int64", "complex128") for i in prog.inputs):
        return "64-bit dtypes"
    if "gpu_known" in prog.flags() and "gpu_bool_cmp_shift_mean" in KNOWN_ISSUES:
        return "known: " + KNOWN_ISSUES["gpu_bool_cmp_shift_mean"]
    if "gpu_bool_arg" in prog.flags() and "gpu_bool_argminmax" in KNOWN_ISSUES:
        return "known: " + KNOWN_ISSUES["gpu_bool_argminmax"]
    if any(has_denormals(v) for v in env.values()):
        # WGSL lets a GPU flush denormal operands and results to zero: from there on the
        # results may legitimately differ (x % denormal, 1 / denormal).
        return "denormal values (a GPU may flush them)"
    if "gpu_specials_folded" in KNOWN_ISSUES and any(
        kind_of(v.dtype) == "f" and not np.all(np.isfinite(v)) for v in env.values()
    ):
        return "known: " + KNOWN_ISSUES["gpu_specials_folded"]
    return None


class Checker:
    """Runs the checks on programs and collects failures and counts."""

    def __init__(self, gpu: bool = True, grad: bool = True, vmap: bool = True):
        self.gpu = gpu and gpu_available()
        self.grad, self.vmap = grad, vmap
        self.stats = Stats()

    def run(self, prog: Program, only: str | None = None) -> list[Failure]:
        """All checks (or just ``only``) on one program."""
        failures: list[Failure] = []
        checks = [
            ("forward", self.check_forward),
            ("vmap", self.check_vmap),
            ("grad", self.check_grad),
        ]
        for name, fn in checks:
            if (
                only is not None
                and not only.startswith(name[:4])
                and not (name == "forward" and only in ("jit", "gpu", "eager"))
                and not (name == "grad" and only == "vjp-jvp")
            ):
                continue
            if (name == "vmap" and not self.vmap) or (name == "grad" and not self.grad):
                continue
            failures += fn(prog, only)
        return failures

    def _attempt(self, check, prog, mode, thunk, compare_with):
        """Run ``thunk``; a crash is a failure unless it is a documented refusal or a known bug."""
        self.stats.count(self.stats.ran, check)
        try:
            with np.errstate(all="ignore"):
                got = thunk()
        except gpu_runtime.GpuUnavailableError:
            self.stats.count(self.stats.skipped, f"{check}: no GPU")
            return []
        except (TypeError, fg.LoweringError) as e:
            if check in ("gpu", "grad-gpu"):
                # The GPU refuses some programs with a documented TypeError (dtypes) or a
                # LoweringError (an adapter's loop cap).
                self.stats.count(self.stats.skipped, f"{check}: refused ({type(e).__name__})")
                return []
            return self._crash(check, prog, mode, e)
        except Exception as e:  # noqa: BLE001 - every other exception is a crash to report
            return self._crash(check, prog, mode, e)
        msg = compare_with(got)
        return [Failure(check, msg, prog, mode)] if msg else []

    def _crash(self, check, prog, mode, e):
        known = known_crash(e)
        if known:
            self.stats.count(self.stats.known, known)
            return []
        return [Failure(check, "crash: " + crash_message(e), prog, mode)]

    def check_forward(self, prog: Program, only=None) -> list[Failure]:
        values = prog.input_values("special")
        try:
            ref, shadow, slacks, env = reference(prog, values)
        except Exception as e:  # noqa: BLE001
            return [Failure("eager", "crash: " + crash_message(e), prog)]
        f = prog.function()
        failures = []
        known = known_value_issue(prog, env)
        if known:
            self.stats.count(self.stats.skipped, f"jit: {known}")
            return []
        if only in (None, "jit"):
            with x64_mode(prog.x64):
                failures += self._attempt(
                    "jit",
                    prog,
                    "special",
                    lambda: fg.jit(f)(*values),
                    lambda got: compare_all(prog, got, ref, shadow, slacks),
                )
        reason = gpu_eligible(prog, env) if self.gpu else "no GPU adapter"
        if only in (None, "gpu") and reason is None:
            failures += self._attempt(
                "gpu",
                prog,
                "special",
                lambda: [np.asarray(o) for o in fg.jit(f, backend="gpu")(*values)],
                lambda got: compare_all(prog, got, ref, shadow, slacks, gpu=True),
            )
        elif reason:
            self.stats.count(self.stats.skipped, f"gpu: {reason}")
        return failures

    def check_vmap(self, prog: Program, only=None) -> list[Failure]:
        samples = [prog.input_values("special", sample=s) for s in (1, 2, 3)]
        batched = [np.stack(col) for col in zip(*samples)]
        try:
            refs = [reference(prog, s) for s in samples]
        except (TypeError, ValueError, IndexError):
            self.stats.count(self.stats.skipped, "vmap: eager refuses a sample")
            return []
        except Exception as e:  # noqa: BLE001
            return [Failure("eager", "crash: " + crash_message(e), prog)]
        ref = [np.stack([r[0][k] for r in refs]) for k in range(len(prog.outputs))]
        shadow = (
            None
            if any(r[1] is None for r in refs)
            else [np.stack([np.asarray(r[1][k]) for r in refs]) for k in range(len(prog.outputs))]
        )
        slacks = [max(r[2][k] for r in refs) for k in range(len(prog.outputs))]
        f = prog.function()
        vprog = dataclasses.replace(prog)
        failures = []
        known = [known_value_issue(prog, r[3]) for r in refs]
        if any(known):
            self.stats.count(self.stats.skipped, f"vmap: {[k for k in known if k][0]}")
            return []
        with x64_mode(prog.x64):
            failures += self._attempt(
                "vmap",
                vprog,
                "special",
                lambda: fg.vmap(f)(*batched),
                lambda got: compare_all(prog, got, ref, shadow, slacks),
            )
            if not failures and only in (None, "vmap-jit"):
                failures += self._attempt(
                    "vmap-jit",
                    vprog,
                    "special",
                    lambda: fg.jit(fg.vmap(f))(*batched),
                    lambda got: compare_all(prog, got, ref, shadow, slacks),
                )
        return failures

    def check_grad(self, prog: Program, only=None) -> list[Failure]:
        flags = prog.flags()
        if "no_reverse" in flags:
            self.stats.count(
                self.stats.skipped, "grad: while_loop or nextafter (no reverse mode in JAX)"
            )
            return []
        if "no_grad_known" in flags and "digamma_derivative" in KNOWN_ISSUES:
            self.stats.count(
                self.stats.skipped, "grad: known " + KNOWN_ISSUES["digamma_derivative"]
            )
            return []
        values = prog.input_values("tame")
        if not any(kind_of(v.dtype) in "fc" for v in values):
            return []
        try:
            ref_out, _, _, env = reference(prog, values)
        except (TypeError, ValueError, IndexError):
            self.stats.count(self.stats.skipped, "grad: eager refuses the tame values")
            return []
        if not any(kind_of(o.dtype) in "fc" for o in ref_out):
            return []
        f = prog.function()
        namespace = namespace_for_exec()
        exec(LOSS_SOURCE, namespace)
        loss_of = namespace["loss_of"]
        loss, xs = loss_of(f, values)
        argnums = tuple(range(len(xs)))
        with x64_mode(prog.x64), np.errstate(all="ignore"):
            try:
                g32 = [np.asarray(g) for g in fg.grad(loss, argnums=argnums)(*xs)]
            except (TypeError, ValueError, IndexError) as e:
                # A documented refusal (as JAX's: a gather from an empty axis, ...).
                self.stats.count(self.stats.skipped, f"grad: refused: {str(e)[:60]}")
                return []
            except Exception as e:  # noqa: BLE001
                return self._crash("grad", prog, "tame", e)
        shadow = None
        if not prog.x64:
            loss64, xs64 = loss_of(f, widen(values))
            with x64_mode(True), np.errstate(all="ignore"):
                try:
                    shadow = [np.asarray(g) for g in fg.grad(loss64, argnums=argnums)(*xs64)]
                except (TypeError, ValueError):
                    # widening only the float32 inputs can leave a primitive that needs equal
                    # dtypes (lax.complex) with float32 and float64 operands: no shadow then
                    self.stats.count(self.stats.skipped, "grad: no float64 shadow (dtypes)")
        # Rounding in a gradient builds up over the whole backward pass: scale by the
        # largest value of the program and of the gradient, times the number of terms.
        terms = max([v.size for v in env.values()] + [1])
        big = max([finite_max(v) for v in env.values()] + [finite_max(g) for g in g32])
        slacks = [terms * big] * len(g32)

        def compare_grads(got, gpu=False):
            msg = compare_all(prog, got, g32, shadow, slacks, gpu=gpu)
            if msg is None:
                return None
            # ... or of the backward pass's own values, where they are larger (asked only
            # after a mismatch: it evaluates the gradient once more, equation by equation)
            with x64_mode(prog.x64), np.errstate(all="ignore"):
                inner = backward_magnitude(fg.grad(loss, argnums=argnums), xs)
            if inner <= big:
                return msg
            return compare_all(prog, got, g32, shadow, [terms * inner] * len(g32), gpu=gpu)

        failures = []
        skip_jit = (
            "sort" in flags
            and "sort_nan_grad" in KNOWN_ISSUES
            and any(kind_of(v.dtype) in "fc" and np.isnan(v).any() for v in env.values())
        )
        skip_jit = skip_jit or known_value_issue(prog, env) is not None
        if only in (None, "grad-jit") and not skip_jit:
            with x64_mode(prog.x64):
                failures += self._attempt(
                    "grad-jit",
                    prog,
                    "tame",
                    lambda: fg.jit(fg.grad(loss, argnums=argnums))(*xs),
                    compare_grads,
                )
        reason = gpu_eligible(prog, env) if self.gpu else "no GPU adapter"
        if only in (None, "grad-gpu") and reason is None and not skip_jit:
            failures += self._attempt(
                "grad-gpu",
                prog,
                "tame",
                lambda: [
                    np.asarray(g)
                    for g in fg.jit(fg.grad(loss, argnums=argnums), backend="gpu")(*xs)
                ],
                lambda got: compare_grads(got, gpu=True),
            )
        if only in (None, "vjp-jvp", "grad-fd"):
            failures += self.check_derivative(prog, loss_of, f, values, flags, only, env)
        return failures

    def check_derivative(self, prog, loss_of, f, values, flags, only, env=None) -> list[Failure]:
        """In float64: ``grad . v`` against ``jvp(v)`` (always), and ``jvp(v)`` against
        central differences (where the function is smooth around the point, and where its
        values, ``env``, leave the steps visible: ``x - 1e30`` absorbs any step below 1e14,
        so every difference quotient is 0 whatever the derivative: seed 90963)."""
        loss, xs = loss_of(f, widen(values))
        vs = [tangent_of(x) for x in xs]
        argnums = tuple(range(len(xs)))
        with x64_mode(True), np.errstate(all="ignore"):
            self.stats.count(self.stats.ran, "vjp-jvp")
            try:
                g = fg.grad(loss, argnums=argnums)(*xs)
                primal, tangent = fg.jvp(loss, tuple(xs), tuple(vs))
            except Exception as e:  # noqa: BLE001
                return self._crash("vjp-jvp", prog, "tame", e)
            # Re(g v): fungrad's gradient of a real loss of a complex input is JAX's,
            # d/dx - i d/dy, so its real part against v is the directional derivative
            terms = [np.real(np.asarray(gi) * v) for gi, v in zip(g, vs)]
            dot = float(sum(t.sum() for t in terms))
            scale = float(sum(np.abs(t).sum() for t in terms)) + abs(float(tangent))
            tangent = float(tangent)
            if not (np.isfinite(dot) and np.isfinite(tangent) and np.isfinite(float(primal))):
                return []
            if abs(dot - tangent) > 1e-6 * scale + 1e-12:
                return [
                    Failure("vjp-jvp", f"grad . v = {dot!r} but jvp = {tangent!r}", prog, "tame")
                ]
            if "no_fd" in flags or only == "vjp-jvp":
                return []
            largest = max((finite_max(v) for v in (env or {}).values()), default=0.0)
            step = 1e-3 * max(finite_max(v) for v in vs)
            if largest * np.finfo(np.float64).eps > 1e-3 * step:
                self.stats.count(
                    self.stats.skipped, "grad-fd: a value too large for the steps to show"
                )
                return []
            self.stats.count(self.stats.ran, "grad-fd")
            errs = []
            for h in (1e-3, 1e-4, 1e-5, 1e-6):
                plus = float(loss(*[x + h * v for x, v in zip(xs, vs)]))
                minus = float(loss(*[x - h * v for x, v in zip(xs, vs)]))
                fd = (plus - minus) / (2 * h)
                # float64 rounding of the loss itself, seen through the difference quotient
                noise = 1e-15 * max(abs(plus), abs(minus)) / h
                errs.append(
                    (abs(fd - tangent) / (abs(tangent) + 1e-3 * scale + 1e-6 + 1e3 * noise), fd)
                )
            best = min(errs)
            small = [e[1] for e in errs[1:]]
            if "kink" in flags and not (
                np.all(np.isfinite(small))
                and max(small) - min(small) <= 1e-4 * (abs(np.median(small)) + 1e-3 * scale + 1e-6)
            ):
                # The step sizes disagree: a kink or jump lies within 1e-4 of the point.
                self.stats.count(self.stats.skipped, "grad-fd: not smooth near the point")
                return []
            if not np.isfinite(best[0]) or best[0] > 1e-3:
                return [
                    Failure(
                        "grad-fd",
                        f"jvp = {tangent!r} but central differences give "
                        f"{[e[1] for e in errs]!r} (h = 1e-3 .. 1e-6)",
                        prog,
                        "tame",
                    )
                ]
        return []
