"""Dtypes, canonicalisation and JAX's type-promotion lattice (with weak types).

* Python scalars are *weakly typed*: ``x * 2.0`` keeps ``x``'s float32, and ``int32 + 1`` stays
  int32. A weak value is represented by the canonical dtype of its kind plus a ``weak_type``
  flag carried by its aval.
* With ``enable_x64`` off (the default) 64-bit dtypes are canonicalised to 32-bit ones, as in
  JAX; with it on they are kept.
* :func:`result_type` follows JAX's lattice (jax.numpy type promotion), not numpy's value-based
  rules: ``int32 + uint32 -> int64`` (int32 without x64), ``int64 + float16 -> float16``.

* Complex dtypes: ``complex64`` (``complex128`` under x64; canonicalised to ``complex64``
  without it). Python ``complex`` scalars are weak (``c*``): ``float32 + 1j`` is complex64.

* jax.dtypes' queries: :func:`issubdtype`, :func:`scalar_type_of`, :func:`itemsize_bits`, and
  :class:`TypePromotionError`.

* ``bfloat16`` is ml_dtypes' numpy dtype, as in JAX. Its numpy ``kind`` is ``"V"``, so code
  asks :func:`kind` (``"f"`` for it) rather than ``dtype.kind``. It promotes as in JAX:
  ``bfloat16 + float16 -> float32``, ``bfloat16 + int32 -> bfloat16``, ``bfloat16 + 1.0 ->
  bfloat16``. Operations on it compute in float32 and round each result to bfloat16 (to nearest,
  ties to even), as XLA's CPU backend does (see ``float_normalization`` and
  ``ir/float_normalization.py``).

* JAX's float8 types (:data:`FLOAT8`: ``float8_e4m3fn``, ``float8_e5m2``, ... ml_dtypes'
  dtypes) are handled as bfloat16 is (computed in float32, each result rounded as ml_dtypes'
  and XLA's conversions round), but they are leaves of the lattice, as in JAX: ``float8 +
  int32`` and ``float8 + 1.0`` stay float8, while ``float8 + float32``, ``float8 + bfloat16``
  and two different float8 types raise :class:`TypePromotionError` (convert explicitly).

JAX's extended dtypes (typed PRNG keys: fungrad's keys are uint32 arrays) are not supported.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from fungrad.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e3m4 = np.dtype(ml_dtypes.float8_e3m4)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3b11fnuz = np.dtype(ml_dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e4m3fnuz = np.dtype(ml_dtypes.float8_e4m3fnuz)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e5m2fnuz = np.dtype(ml_dtypes.float8_e5m2fnuz)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

FLOAT8 = (
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
)
"""JAX's 8-bit float dtypes (ml_dtypes'), those ``jax.numpy`` 0.10.2 exports."""
_FLOAT8_SET = frozenset(FLOAT8)

_ML_FLOATS = frozenset({bfloat16, *FLOAT8})
"""ml_dtypes' floating dtypes fungrad has (numpy kind ``"V"``; :func:`kind` says ``"f"``)."""

float0 = np.dtype([("float0", np.void, 0)])
"""The dtype of cotangents of integer and bool inputs (JAX's ``jax.dtypes.float0``): a
zero-size type, since such inputs have no tangent space."""

SUPPORTED = (
    bool_,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    float16,
    bfloat16,
    float32,
    float64,
    complex64,
    complex128,
    *FLOAT8,
)
_SUPPORTED_SET = frozenset(SUPPORTED)

_SHORT_NAMES = {
    bool_: "bool",
    int8: "i8",
    int16: "i16",
    int32: "i32",
    int64: "i64",
    uint8: "u8",
    uint16: "u16",
    uint32: "u32",
    uint64: "u64",
    float16: "f16",
    bfloat16: "bf16",
    float32: "f32",
    float64: "f64",
    complex64: "c64",
    complex128: "c128",
    # JAX's jaxpr names: f8_e4m3fn, f8_e5m2, ...
    **{dt: "f8_" + dt.name.removeprefix("float8_") for dt in FLOAT8},
}

_X64_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def short_name(dtype: np.dtype) -> str:
    """The jaxpr printer's name for ``dtype`` (``f32``, ``i32``, ``bool``...)."""
    return _SHORT_NAMES[dtype]


def canonicalize_dtype(dtype) -> np.dtype:
    """``dtype`` as fungrad stores it: 64-bit types become 32-bit unless x64 is enabled.

    Raises TypeError for dtypes fungrad does not support (strings, objects, JAX's sub-byte
    integers).
    """
    if isinstance(dtype, np.dtype):  # the common case: a table lookup
        dt = (_CANONICAL_X64 if config.enable_x64 else _CANONICAL_32).get(dtype)
        if dt is not None:
            return dt
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{dtype!r} is not a valid dtype") from e
    if dt not in _SUPPORTED_SET:
        raise TypeError(
            f"dtype {dt} is not supported by fungrad; supported dtypes are "
            + ", ".join(str(d) for d in SUPPORTED)
        )
    if not config.enable_x64:
        return _X64_TO_32.get(dt, dt)
    return dt


def check_user_dtype(dtype, fun_name: str, stacklevel: int = 3) -> np.dtype:
    """Canonicalize a dtype the user asked for by name in ``fun_name`` (``zeros(3,
    dtype=float64)``, ``astype``...). Without x64 a 64-bit dtype becomes 32-bit, as
    everywhere, but here the user said so explicitly: warn (UserWarning, as JAX does), naming
    the option that keeps 64 bits. Python's ``int``/``float`` mean "the default type" and do
    not warn."""
    dt = canonicalize_dtype(dtype)
    if (
        not config.enable_x64
        and dtype not in (int, float, bool, complex)
        and np.dtype(dtype) in _X64_TO_32
    ):
        import warnings

        warnings.warn(
            f"{fun_name}: explicitly requested dtype {np.dtype(dtype)} is not available "
            f"without 64-bit mode and is truncated to {dt}. Enable 64-bit types with "
            "fungrad.config.update('enable_x64', True) (JAX's name 'jax_enable_x64' works "
            "too) or FUNGRAD_ENABLE_X64=1 in the environment.",
            UserWarning,
            stacklevel=stacklevel,
        )
    return dt


_CANONICAL_32 = {dt: _X64_TO_32.get(dt, dt) for dt in SUPPORTED}
_CANONICAL_X64 = {dt: dt for dt in SUPPORTED}


def default_float_dtype() -> np.dtype:
    return float64 if config.enable_x64 else float32


def default_complex_dtype() -> np.dtype:
    return complex128 if config.enable_x64 else complex64


def default_int_dtype() -> np.dtype:
    return int64 if config.enable_x64 else int32


def default_uint_dtype() -> np.dtype:
    return uint64 if config.enable_x64 else uint32


def kind(dtype) -> str:
    """numpy's one-letter kind of ``dtype`` (``"b"``, ``"i"``, ``"u"``, ``"f"``, ``"c"``), with
    ml_dtypes' floats (bfloat16; numpy says ``"V"``) as ``"f"``."""
    k = dtype.kind if isinstance(dtype, np.dtype) else np.dtype(dtype).kind
    return "f" if k == "V" and np.dtype(dtype) in _ML_FLOATS else k


def is_ml_float(dtype) -> bool:
    """True for ml_dtypes' floating dtypes (bfloat16, the float8 types): the ones numpy and
    LLVM do not compute in, which operations widen to float32 and round back."""
    return np.dtype(dtype) in _ML_FLOATS


def is_float8(dtype) -> bool:
    """True for JAX's 8-bit float dtypes (:data:`FLOAT8`)."""
    return np.dtype(dtype) in _FLOAT8_SET


def is_float(dtype) -> bool:
    return kind(dtype) == "f"


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def is_inexact(dtype) -> bool:
    """True for floating and complex dtypes (the ones with a tangent space)."""
    return kind(dtype) in "fc"


def real_dtype(dtype) -> np.dtype:
    """The real dtype of the same precision: complex64 -> float32, complex128 -> float64;
    other dtypes are returned unchanged."""
    dt = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(dt, dt)


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of the same precision: float64 -> complex128, any other real
    dtype -> complex64 (as JAX); complex dtypes are returned unchanged."""
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return dt
    return complex128 if dt == float64 else complex64


def is_int(dtype) -> bool:
    """True for signed and unsigned integers (not bool)."""
    return kind(dtype) in "iu"


def is_signed(dtype) -> bool:
    return np.dtype(dtype).kind == "i"


def is_unsigned(dtype) -> bool:
    return np.dtype(dtype).kind == "u"


def is_bool(dtype) -> bool:
    return np.dtype(dtype).kind == "b"


def python_scalar_dtype(x) -> np.dtype:
    """The (weak) dtype a Python scalar takes: bool -> bool, int -> int, float -> float,
    complex -> complex."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int_dtype()
    if isinstance(x, float):
        return default_float_dtype()
    if isinstance(x, complex):
        return default_complex_dtype()
    raise TypeError(f"{type(x).__name__} is not a Python scalar type fungrad supports")


class TypePromotionError(ValueError):
    """Raised when JAX's type promotion fails (``jax.dtypes.TypePromotionError``, a ValueError):
    an implicit conversion between dtypes that has no safe path."""


# -- the promotion lattice ---------------------------------------------------------------
# Nodes are dtypes or the weak kinds "i*" (Python int), "f*" (Python float) and "c*"
# (Python complex). An edge a -> b means "a promotes to b"; result_type is the least upper
# bound. (JAX's lattice.)
_I_WEAK, _F_WEAK, _C_WEAK = "i*", "f*", "c*"
_LATTICE = {
    bool_: [_I_WEAK],
    _I_WEAK: [uint8, int8],
    uint8: [int16, uint16],
    uint16: [int32, uint32],
    uint32: [int64, uint64],
    uint64: [_F_WEAK],
    int8: [int16],
    int16: [int32],
    int32: [int64],
    int64: [_F_WEAK],
    # The float8 types are leaves, as in JAX: only Python floats, ints and bools (and integer
    # dtypes, through the weak float) promote to them, and they promote to nothing.
    _F_WEAK: [*FLOAT8, float16, bfloat16, _C_WEAK],
    **{dt: [] for dt in FLOAT8},
    float16: [float32],
    bfloat16: [float32],
    float32: [float64, complex64],
    float64: [complex128],
    _C_WEAK: [complex64],
    complex64: [complex128],
    complex128: [],
}


def _upper_sets():
    ups = {}

    def visit(node):
        if node not in ups:
            s = {node}
            for nxt in _LATTICE[node]:
                s |= visit(nxt)
            ups[node] = frozenset(s)
        return ups[node]

    for node in _LATTICE:
        visit(node)
    return ups


_UPPER = _upper_sets()


_WEAK_NAMES = {_I_WEAK: "<class 'int'>", _F_WEAK: "<class 'float'>", _C_WEAK: "<class 'complex'>"}


@functools.cache
def _join(nodes: frozenset):
    common = functools.reduce(frozenset.intersection, (_UPPER[n] for n in nodes))
    for cand in common:
        if _UPPER[cand] == common:
            return cand
    # only the float8 leaves have no common upper bound with other types (JAX's message)
    names = tuple(_WEAK_NAMES.get(n, str(n)) for n in nodes)
    raise TypePromotionError(
        f"Input dtypes {names} have no available implicit dtype promotion path. To avoid "
        "unintended promotion, 8-bit floats do not support implicit promotion. If you'd like "
        "your inputs to be promoted to another type, you can do so explicitly using e.g. "
        "x.astype('float32')"
    )


def _node(dtype: np.dtype, weak: bool):
    if weak:
        k = kind(dtype)
        if k in "iu":
            return _I_WEAK
        if k == "f":
            return _F_WEAK
        if k == "c":
            return _C_WEAK
    return dtype


@functools.lru_cache(maxsize=4096)
def _promote(pairs: tuple, x64: bool) -> tuple[np.dtype, bool]:
    dts = frozenset(dt for dt, _ in pairs)
    if all(w for _, w in pairs):
        # As JAX: all weak -> the join of their strong dtypes, weak (a weak bfloat16 stays
        # bfloat16; weak int32 and weak float32 give weak float32).
        node, _ = _promote(tuple((dt, False) for dt in dts), x64)
        return node, True
    if len(dts) == 1:  # one dtype, some operand strong: that dtype, strong
        (node,) = dts
        return (node if x64 else _X64_TO_32.get(node, node)), False
    node = _join(frozenset(_node(dt, w) for dt, w in pairs))
    if node == _I_WEAK:
        return (int64 if x64 else int32), True
    if node == _F_WEAK:
        return (float64 if x64 else float32), True
    if node == _C_WEAK:
        return (complex128 if x64 else complex64), True
    if not x64:
        node = _X64_TO_32.get(node, node)
    return node, False


def promote_types(*pairs: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """Join ``(dtype, weak_type)`` pairs in JAX's lattice; returns ``(dtype, weak_type)``."""
    return _promote(tuple(pairs), config.enable_x64)


def dtype_and_weak(x) -> tuple[np.dtype, bool]:
    """``(dtype, weak_type)`` of an array-like or Python scalar, canonicalised."""
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return python_scalar_dtype(x), not isinstance(x, bool)
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    dt = getattr(x, "dtype", None)
    if dt is None:
        raise TypeError(f"cannot determine a dtype for a value of type {type(x).__name__}")
    return canonicalize_dtype(dt), False


def result_type(*args, return_weak_type_flag: bool = False):
    """The dtype JAX gives an operation on ``args`` (arrays, scalars or dtypes)."""
    pairs = []
    for a in args:
        if isinstance(a, (np.dtype, type)) or isinstance(a, str):
            pairs.append((canonicalize_dtype(a), False))
        else:
            pairs.append(dtype_and_weak(a))
    if not pairs:
        raise ValueError("result_type needs at least one argument")
    dt, weak = promote_types(*pairs)
    return (dt, weak) if return_weak_type_flag else dt


def finfo(dtype):
    """Machine limits of a floating (or complex: its real part's) dtype (numpy's finfo of the
    canonical dtype; ml_dtypes' for bfloat16 and the float8 types, as JAX)."""
    dt = canonicalize_dtype(dtype)
    return ml_dtypes.finfo(dt) if dt in _ML_FLOATS else np.finfo(dt)


def iinfo(dtype):
    """Machine limits of an integer dtype (numpy's iinfo of the canonical dtype)."""
    return np.iinfo(canonicalize_dtype(dtype))


# -- jax.dtypes' queries ------------------------------------------------------------------------


_ML_FLOAT_PARENTS = (np.floating, np.inexact, np.number, np.generic)


def _ml_float_or_none(x):
    """The ml_dtypes float dtype ``x`` names (a dtype, a scalar type such as ``fnp.bfloat16``,
    a name), else None."""
    if isinstance(x, type) and issubclass(x, np.generic) and x.__module__ == "numpy":
        return None  # numpy's own types (and its abstract ones, which np.dtype refuses)
    try:
        if x is None:
            return None
        dt = np.dtype(x.dtype if isinstance(x, type) and hasattr(x, "dtype") else x)
    except TypeError:
        return None
    return dt if dt in _ML_FLOATS else None


def issubdtype(a, b) -> bool:
    """Whether dtype (or scalar type, or dtype name) ``a`` is ``b`` or below it in numpy's type
    hierarchy: ``issubdtype(np.int8, np.integer)``, ``issubdtype(float, np.floating)``; ``None``
    reads as float64, as in numpy. As in JAX, bfloat16 and the float8 types sit under
    ``np.floating`` (numpy puts
    ml_dtypes' types under ``np.generic`` only); JAX's sub-byte and extended dtypes fungrad
    does not have, so elsewhere numpy's answer is JAX's."""
    a_ml = _ml_float_or_none(a)
    if a_ml is not None:
        if b in _ML_FLOAT_PARENTS:
            return True
        return _ml_float_or_none(b) == a_ml
    return bool(np.issubdtype(a, b))


_SCALAR_TYPE_OF_KIND = {"b": bool, "i": int, "u": int, "f": float, "c": complex}


def scalar_type_of(x) -> type:
    """The Python scalar type (``bool``, ``int``, ``float`` or ``complex``) of the kind of ``x``:
    a value (Python or numpy scalar, array, tracer) or a dtype, scalar type or dtype name.
    TypeError for non-numeric dtypes and values without a dtype, ValueError for None."""
    if x is None:
        raise ValueError(f"Invalid argument to dtype: {x}.")
    python_scalar_types = (bool, int, float, complex)
    if type(x) in python_scalar_types:
        return type(x)
    if isinstance(x, type) and x in python_scalar_types:
        return x
    dt = getattr(x, "dtype", None)
    if not isinstance(dt, np.dtype):
        if not isinstance(x, (str, type, np.dtype)):
            raise TypeError(f"Cannot determine dtype of {x}")
        dt = np.dtype(x)
    kind_ = _SCALAR_TYPE_OF_KIND.get(kind(dt))
    if kind_ is None or dt not in _SUPPORTED_SET:
        raise TypeError(
            f"Invalid scalar value {x!r}: dtype {dt} is not a numeric dtype fungrad has"
        )
    return kind_


def itemsize_bits(dtype) -> int:
    """The number of bits of one element of ``dtype`` as stored: 8 for bool (a byte), else the
    dtype's width (``int`` and ``float`` mean numpy's 64-bit types here, whatever the x64 setting,
    as in JAX). ValueError for None and non-numeric dtypes (float0, strings, objects)."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    dt = np.dtype(dtype)
    if kind(dt) not in "biufc":
        raise ValueError(f"itemsize_bits: unexpected input: dtype={dtype!r}")
    return 8 * dt.itemsize


class extended(np.generic):  # noqa: N801  (JAX's name)
    """JAX's scalar type above its *extended* dtypes (typed PRNG keys and other dtypes that
    libraries define): ``issubdtype(dt, extended)`` asks whether ``dt`` is one. fungrad has no
    extended dtype (its PRNG keys are uint32 arrays), so the answer is False for every dtype
    it has."""


class prng_key(extended):  # noqa: N801  (JAX's name)
    """JAX's scalar type of typed PRNG key dtypes (``jax.random.key``'s ``key<fry>``):
    ``issubdtype(k.dtype, prng_key)`` tells typed keys from raw ones. fungrad's keys are raw
    uint32 arrays (``fungrad.random.key`` as ``PRNGKey``), so it is False for all of them."""
