"""Drawing complex numbers, the FFT and linear algebra into random programs.

One program in four (``draw_program``'s ``extended`` draw) uses :data:`EXTENDED_TABLE`: the real
families of ``tests/fuzz/gen.py`` (which never pick a complex value) plus the families below.
Complex arithmetic and functions and FFTs of an infinite or NaN number, or overflowing, are
implementation-defined (flag ``"special_open"``: after them only elements finite on both sides
are compared; JAX and numpy disagree on a third of C99's special cases). Their operations also
carry the flag ``"rounds"``: complex products, quotients and transcendental functions, FFTs and
LAPACK routines round differently under jit than numpy's eager impls (fused multiply-adds,
another algorithm), so a float64 program's nudged shadow moves them (``tests/fuzz/check.py``).

Linear algebra is drawn on matrices built well-conditioned inside the program from fresh
inputs in [-1, 1] (role ``"moderate"``): ``A Aᴴ + n I`` (Hermitian positive definite, eigenvalues
at least n), ``A + (n + 1) I`` (strictly diagonally dominant) and ``(A + Aᴴ) / 2``. Results
that are unique only up to a sign or phase (eigenvectors, singular vectors, Q and R) enter the
program through quantities that are not: their elementwise ``abs``, so jit and eager may pick
different phases and still agree, and gradients are defined (as JAX's are for such losses).
"""

from __future__ import annotations

from tests.fuzz import gen
from tests.fuzz.gen import Builder, broadcastable, compatible_shape, kind_of

COMPLEX_SCALARS = ["(1+2j)", "2j", "(-0.5+0j)", "1.5", "(0.25-3j)", "-1j"]


def is_complex(v) -> bool:
    return kind_of(v.dtype) == "c"


def pick_complex(b: Builder, pred=lambda v: True):
    return b.pick(lambda v: is_complex(v) and pred(v), complex_ok=True)


def complex_partner(b: Builder, a: str) -> str:
    """A second operand for an elementwise op on complex ``a``: a complex or float value that
    broadcasts, a weakly typed Python complex or float scalar, or a fresh complex input."""
    sa = b.shape(a)
    r = b.ch.integer(0, 9)
    if r < 4:
        other = b.pick(
            lambda v: broadcastable(sa, tuple(v.shape), b.max_size) and kind_of(v.dtype) in "cf",
            complex_ok=True,
        )
        if other is not None:
            return other
    if r < 7:
        return b.ch.choice(COMPLEX_SCALARS)
    return b.new_input(compatible_shape(b.ch, sa), b.dtype(a).name)


def gen_to_complex(b: Builder):
    """A complex value from real ones."""
    a = b.pick(lambda v: kind_of(v.dtype) == "f")
    if a is None:
        return None
    r = b.ch.integer(0, 3)
    if r == 0:
        c = b.pick(lambda v: v.shape == b.values[a].shape and v.dtype == b.values[a].dtype) or a
        return b.add(f"lax.complex({a}, {c})", [a, c], "to_complex", ("rounds",))
    if r == 1:
        return b.add(f"({a} * 1j)", [a], "to_complex", ("rounds", "special_open"))
    if r == 2:
        return b.add(f"fnp.exp(1j * {a})", [a], "to_complex", ("rounds", "special_open"))
    # (complex: complex128 under x64, as in JAX; complex64 there would round a float64
    # program's values to float32, beyond the tolerance of its float64 gradients)
    return b.add(f"{a}.astype(complex)", [a], "to_complex")


C_UNARY = {  # name -> flags
    "fnp.exp": (),
    "fnp.log": ("kink", "branch_cut"),  # the branch cut along the negative reals
    "fnp.sqrt": ("kink", "branch_cut"),
    "fnp.sin": (),
    "fnp.cos": (),
    "fnp.tan": (),
    "fnp.tanh": (),
    "fnp.sinh": (),
    "fnp.cosh": (),
    "fnp.negative": (),
    "fnp.square": (),
    "fnp.reciprocal": (),
    "fnp.conj": (),
    "fnp.real": ("part",),
    "fnp.imag": ("part",),
    "fnp.abs": ("kink",),
    "fnp.angle": ("kink", "branch_cut"),
    "fnp.expm1": (),
    "fnp.log1p": ("kink", "branch_cut"),
    "fnp.sign": ("kink", "no_fd"),  # z / |z|, but its derivative is zero (as JAX's)
    "fnp.isnan": ("kink",),
    "fnp.isfinite": ("kink",),
}


def gen_c_unary(b: Builder):
    a = pick_complex(b)
    if a is None:
        return gen_to_complex(b)
    fn = b.ch.choice(sorted(C_UNARY))
    return b.add(f"{fn}({a})", [a], "c_unary", C_UNARY[fn] + ("rounds", "special_open"))


C_BINARY = ["+", "-", "*", "/", "fnp.add", "fnp.subtract", "fnp.multiply", "fnp.divide"]


def gen_c_binary(b: Builder):
    a = pick_complex(b)
    if a is None:
        return gen_to_complex(b)
    c = complex_partner(b, a)
    args = [x for x in (a, c) if x in b.values]
    r = b.ch.integer(0, 9)
    if r == 0:
        fn = b.ch.choice(["==", "!=", "fnp.equal", "fnp.not_equal"])
        return b.add(gen.binary_expr(fn, a, c), args, "c_compare", ("kink",))
    if r == 1:
        cond = b.pick(
            lambda v: kind_of(v.dtype) == "b" and broadcastable(b.shape(a), v.shape, b.max_size)
        )
        cond = cond or f"(fnp.real({a}) > 0)"
        args = [x for x in (cond, a, c) if x in b.values]
        return b.add(f"fnp.where({cond}, {a}, {c})", args, "c_where", ("kink",))
    if r == 2:
        return b.add(f"({a} ** 2)", [a], "c_binary", ("rounds", "special_open"))
    fn = b.ch.choice(C_BINARY)
    return b.add(gen.binary_expr(fn, a, c), args, "c_binary", ("rounds", "special_open"))


def gen_c_reduce(b: Builder):
    a = pick_complex(b)
    if a is None:
        return gen_to_complex(b)
    nd = len(b.shape(a))
    fn = b.ch.choice(["fnp.sum", "fnp.sum", "fnp.mean", "fnp.prod", "fnp.cumsum", "fnp.var"])
    if fn == "fnp.cumsum":
        if not nd:
            return None
        axis = b.ch.integer(-nd, nd - 1)
        return b.add(
            f"fnp.cumsum({a}, axis={axis})", [a], "c_reduce", ("reduce", "rounds", "special_open")
        )
    axes = gen.draw_axes(b.ch, nd)
    keep = b.ch.choice(["False", "True"])
    flags = ("reduce", "rounds", "special_open") + (("kink",) if fn == "fnp.prod" else ())
    return b.add(f"{fn}({a}, axis={axes}, keepdims={keep})", [a], "c_reduce", flags)


def gen_c_dot(b: Builder):
    a = pick_complex(b, lambda v: len(v.shape) > 0)
    if a is None:
        return gen_to_complex(b)
    s = b.shape(a)
    dtype = b.dtype(a).name if b.ch.chance(70) else b.float_dtype()
    if b.ch.chance(50):
        m = b.ch.choice([None, 1, 2, 3])
        c = b.new_input((s[-1],) if m is None else (s[-1], m), dtype)
        fn = b.ch.choice(["@", "fnp.matmul", "fnp.dot", "fnp.vdot"] if m is None else ["@"])
        if fn == "fnp.vdot" and len(s) != 1:
            fn = "@"
        return b.add(
            gen.binary_expr(fn, a, c), [a, c], "c_dot", ("reduce", "rounds", "special_open")
        )
    letters = "abcd"[: len(s)]
    other = "".join(ch for ch in letters if b.ch.chance(60)) + b.ch.choice(["", "e"])
    cshape = tuple(s[letters.index(ch)] if ch in letters else 2 for ch in other)
    c = b.new_input(cshape, dtype)
    union = sorted(set(letters + other))
    out = "".join(ch for ch in union if b.ch.chance(50))
    return b.add(
        f"fnp.einsum('{letters},{other}->{out}', {a}, {c})",
        [a, c],
        "c_einsum",
        ("reduce", "rounds", "special_open"),
    )


FFT_COMPLEX = ["fnp.fft.fft", "fnp.fft.ifft", "fnp.fft.irfft", "fnp.fft.hfft"]
FFT_REAL = ["fnp.fft.rfft", "fnp.fft.ihfft", "fnp.fft.fft"]
FFT_N = ["fnp.fft.fftn", "fnp.fft.ifftn", "fnp.fft.fft2", "fnp.fft.ifft2"]
FFT_N_REAL = ["fnp.fft.rfftn", "fnp.fft.rfft2"]


def gen_fft(b: Builder):
    a = b.pick(lambda v: len(v.shape) > 0 and kind_of(v.dtype) in "cf", complex_ok=True)
    if a is None:
        return None
    s = b.shape(a)
    nd = len(s)
    real = kind_of(b.dtype(a)) == "f"
    norm = b.ch.choice(["", ", norm='ortho'", ", norm='forward'", ", norm='backward'"])
    flags = ("reduce", "rounds", "special_open")
    r = b.ch.integer(0, 5)
    if r == 5:
        shift = b.ch.choice(["fnp.fft.fftshift", "fnp.fft.ifftshift"])
        return b.add(f"{shift}({a}, axes={gen.draw_axes(b.ch, nd)})", [a], "fftshift")
    if r >= 3 and nd >= 2:
        fn = b.ch.choice(FFT_N + (FFT_N_REAL if real else []))
        if fn.endswith("2"):
            axes = b.ch.choice([(-2, -1), (0, nd - 1), (nd - 1, 0)])
        else:
            axes = sorted({b.ch.integer(-nd, nd - 1) % nd for _ in range(b.ch.integer(1, nd))})
        shape = ""
        if b.ch.chance(30):
            shape = f", s={tuple(b.ch.integer(1, 5) for _ in axes)!r}"
        return b.add(f"{fn}({a}{shape}, axes={tuple(axes)!r}{norm})", [a], "fftn", flags)
    fn = b.ch.choice(FFT_REAL if real else FFT_COMPLEX)
    n = "" if b.ch.chance(50) else f", n={b.ch.integer(1, 9)}"
    axis = b.ch.integer(-nd, nd - 1)
    return b.add(f"{fn}({a}{n}, axis={axis}{norm})", [a], "fft", flags)


def gen_linalg(b: Builder):
    n = b.ch.integer(1, 4)
    batch = b.ch.choice([(), (), (2,)])
    dtype = b.ch.choice([b.float_dtype(), b.complex_dtype()])
    a = b.new_input(batch + (n, n), dtype, "moderate")
    eye = f"fnp.eye({n}, dtype={a}.dtype)"
    aH = f"fnp.conj(fnp.swapaxes({a}, -1, -2))"
    spd = f"({a} @ {aH} + {n}.0 * {eye})"
    dominant = f"({a} + {n + 1}.0 * {eye})"
    herm = f"(({a} + {aH}) / 2)"
    flags = ("reduce", "rounds", "linalg")
    r = b.ch.integer(0, 11)
    if r == 0:
        k = b.ch.choice([None, 1, 2])
        rhs = b.new_input(batch + ((n,) if k is None else (n, k)), dtype, "moderate")
        if k is None and batch:
            return b.add(
                f"fnp.linalg.solve({dominant}, {rhs}[..., None])[..., 0]", [a, rhs], "linalg", flags
            )
        m = b.ch.choice([spd, dominant])
        return b.add(f"fnp.linalg.solve({m}, {rhs})", [a, rhs], "linalg", flags)
    if r == 1:
        return b.add(f"fnp.linalg.inv({b.ch.choice([spd, dominant])})", [a], "linalg", flags)
    if r == 2:
        return b.add(f"fnp.linalg.det({b.ch.choice([spd, dominant])})", [a], "linalg", flags)
    if r == 3:
        which = b.ch.integer(0, 1)
        m = b.ch.choice([spd, dominant])
        return b.add(f"fnp.linalg.slogdet({m})[{which}]", [a], "linalg", flags)
    if r == 4:
        return b.add(f"fnp.linalg.cholesky({spd})", [a], "linalg", flags)
    if r == 5:
        which = b.ch.integer(0, 1)
        return b.add(
            f"fnp.abs(fnp.linalg.qr({dominant})[{which}])", [a], "linalg", flags + ("kink",)
        )
    if r == 6:
        return b.add(f"fnp.linalg.eigh({herm})[0]", [a], "linalg", flags)
    if r == 7:
        return b.add(f"fnp.abs(fnp.linalg.eigh({herm})[1])", [a], "linalg", flags + ("kink",))
    if r == 8:
        return b.add(f"fnp.linalg.svd({a}, compute_uv=False)", [a], "linalg", flags + ("kink",))
    if r == 9:
        which = b.ch.choice([0, 2])
        return b.add(
            f"fnp.abs(fnp.linalg.svd({dominant})[{which}])", [a], "linalg", flags + ("kink",)
        )
    if r == 10:
        rhs = b.new_input(batch + (n, b.ch.choice([1, 2])), dtype, "moderate")
        lower = b.ch.choice([True, False])
        tri = f"fnp.linalg.cholesky({spd})"
        if not lower:
            tri = f"fnp.conj(fnp.swapaxes({tri}, -1, -2))"
        return b.add(
            f"fg.scipy.linalg.solve_triangular({tri}, {rhs}, lower={lower})",
            [a, rhs],
            "linalg",
            flags,
        )
    return b.add(f"fnp.linalg.eigvalsh({herm})", [a], "linalg", flags)


COMPLEX_FAMILIES = [
    (gen_to_complex, 2),
    (gen_c_unary, 5),
    (gen_c_binary, 5),
    (gen_c_reduce, 2),
    (gen_c_dot, 2),
    (gen_fft, 4),
    (gen_linalg, 4),
]
EXTENDED_TABLE = gen.FAMILY_TABLE + [f for f, w in COMPLEX_FAMILIES for _ in range(w)]
