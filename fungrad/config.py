"""Global configuration, spelled as JAX spells it: ``fungrad.config.update("enable_x64", True)``.

Options are plain attributes of one ``Config`` object so hot paths read them with a single
attribute lookup. Each option can also be set from the environment before import
(``FUNGRAD_ENABLE_X64=1``; JAX's spelling ``JAX_ENABLE_X64=1`` too, for the options JAX has).

JAX's option names are aliases: ``config.update("jax_enable_x64", True)``,
``config.jax_enable_x64``, ``config.read("jax_disable_jit")``. The options JAX exposes at top
level are also ``State`` objects (``fungrad.enable_x64``, ``fungrad.enable_checks``,
``fungrad.default_matmul_precision``, defined in :mod:`fungrad.api` so that this module has no
attribute that could be mistaken for an option): ``with fg.enable_x64(True): ...`` sets the
option for the block, ``fg.enable_x64.value`` reads it.

NB: JAX's states are thread-local inside a ``with`` block; fungrad's options are process-wide,
so a ``with`` block changes them for every thread until it exits.
"""

from __future__ import annotations

import os

_OPTIONS = {
    # 64-bit floats and ints; off by default, as in JAX (64-bit inputs become 32-bit).
    "enable_x64": False,
    # Check, after every eager primitive, that its numpy impl produced the shape and
    # dtype that its abstract_eval predicts. The test suite turns it on; it is cheap
    # enough to use while debugging a new primitive. JAX's name: jax_enable_checks.
    "check_impl_avals": False,
    # Do not read or write the on-disk cache of compiled CPU programs
    # (fungrad/lowering/cpu/cache.py); the environment variable FUNGRAD_DISABLE_CACHE=1 does the
    # same. fungrad's own libraries (matrix product, FFTs...) stay cached unless
    # FUNGRAD_DISABLE_CACHE=all.
    "disable_compile_cache": False,
    # Log (logger "fungrad.jit", level WARNING) why a jitted function is traced again: which
    # argument's shape, dtype, weak type or static value changed, or its pytree structure.
    "explain_recompiles": False,
    # A jitted function traced more than this many times warns once (RetraceWarning) with the
    # last change; 0 turns the warning off.
    "jit_retrace_warning_threshold": 8,
    # A jitted function keeps at most this many traced-and-compiled signatures (shapes, dtypes,
    # static values...); beyond it the least recently used are dropped (JAX's bound is also
    # 4096). 0 keeps every one.
    "jit_cache_max_entries": 4096,
    # jit(f)(...) calls f as plain Python (every operation eager), as jax.disable_jit does.
    "disable_jit": False,
    # The precision of matrix products when none is given. fungrad always multiplies in the
    # operands' own dtype at full precision (as JAX does on the CPU), so every accepted value
    # computes the same; the option exists so that JAX programs setting it run.
    "default_matmul_precision": None,
    # The platforms computations may use: fungrad computes on the CPU, and on the GPU only
    # where jit(f, backend="gpu") asks for it, so only "cpu" (or nothing) is accepted.
    "platforms": None,
    # Raise FloatingPointError naming the first primitive whose floating output holds a NaN
    # (debug_nans) or an infinity (debug_infs): checked after every eager primitive; a jitted
    # function's outputs are checked and, when one is bad, the function is run again eagerly
    # to find the primitive (as JAX does).
    "debug_nans": False,
    "debug_infs": False,
    # Implicit rank promotion in fungrad.numpy's binary operators (adding a (3,) array to a
    # (2, 3) one): "allow" (numpy's rule), "warn" (a UserWarning) or "raise" (ValueError).
    # 0-d operands never count.
    "numpy_rank_promotion": "allow",
    # Log (logger "fungrad.jit", level WARNING, as JAX logs jax_log_compiles) each compile of
    # a jitted function: its name, signature and seconds per phase (trace, optimize, plan,
    # render, compile).
    "log_compiles": False,
}

# Derived flags the hot paths read as one attribute (kept up to date by Config.__setattr__):
#   eager_checks: some check runs after each eager primitive;
#   jit_general_only: jitted calls must take the general (checked / plain Python) path
#   (also while a fungrad.profile() is open: it sets the non-option attribute _profiling).
_DERIVED = {
    "eager_checks": ("check_impl_avals", "debug_nans", "debug_infs"),
    "jit_general_only": ("disable_jit", "debug_nans", "debug_infs", "_profiling"),
}

# JAX's option names -> fungrad's.
_ALIASES = {
    "jax_log_compiles": "log_compiles",
    "jax_enable_x64": "enable_x64",
    "jax_enable_checks": "check_impl_avals",
    "jax_disable_jit": "disable_jit",
    "jax_default_matmul_precision": "default_matmul_precision",
    "jax_platforms": "platforms",
    "jax_platform_name": "platforms",
    "jax_explain_cache_misses": "explain_recompiles",
    "jax_debug_nans": "debug_nans",
    "jax_debug_infs": "debug_infs",
    "jax_numpy_rank_promotion": "numpy_rank_promotion",
}

# JAX's accepted values of jax_default_matmul_precision.
_PRECISIONS = (
    None,
    "default",
    "high",
    "highest",
    "bfloat16",
    "tensorfloat32",
    "float32",
    "fastest",
    "bfloat16_3x",
    "tensorfloat32_3x",
    "ANY_F8_ANY_F8_F32",
    "ANY_F8_ANY_F8_F32_FAST_ACCUM",
    "F16_F16_F16",
    "F16_F16_F32",
    "BF16_BF16_BF16",
    "BF16_BF16_F32",
    "BF16_BF16_F32_X3",
    "BF16_BF16_F32_X6",
    "TF32_TF32_F32",
    "TF32_TF32_F32_X3",
    "F32_F32_F32",
    "F64_F64_F64",
)


class UnknownOptionError(AttributeError, ValueError):
    """An option name fungrad does not know. JAX raises AttributeError for it (so programs
    that probe for a flag catch AttributeError); it is a ValueError too, fungrad's type for a
    bad argument value."""


def _canonical(name: str, fun: str) -> str:
    if name in _OPTIONS:
        return name
    if name in _ALIASES:
        return _ALIASES[name]
    known = ", ".join(sorted(_OPTIONS) + sorted(_ALIASES))
    raise UnknownOptionError(f"config.{fun}: unknown option {name!r}; known options: {known}")


def _parse_env(name: str, raw: str, default):
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if default is None:
        return raw.strip() or None
    return type(default)(raw)


def _from_env(name: str, default):
    raw = os.environ.get("FUNGRAD_" + name.upper())
    if raw is None:
        for alias, target in _ALIASES.items():
            if target == name and os.environ.get(alias.upper()) is not None:
                raw = os.environ[alias.upper()]
                break
    if raw is None:
        return default
    value = _parse_env(name, raw, default)
    _check_value(name, value, "environment variable")
    return value


def _check_value(name: str, value, where: str) -> None:
    if name == "default_matmul_precision" and value not in _PRECISIONS:
        raise ValueError(
            f"{where}: default_matmul_precision must be one of "
            f"{', '.join(map(repr, _PRECISIONS))}; got {value!r}"
        )
    if name == "numpy_rank_promotion" and value not in ("allow", "warn", "raise"):
        raise ValueError(
            f"{where}: numpy_rank_promotion must be 'allow', 'warn' or 'raise'; got {value!r}"
        )
    if name == "platforms" and value not in (None, "", "cpu"):
        raise ValueError(
            f"{where}: platforms={value!r}: fungrad computes on the CPU (jit(f, "
            "backend='gpu') runs one function on the GPU), so only 'cpu' is "
            "accepted; leave the option unset"
        )


class Config:
    """Holds every option as an attribute; change them with :meth:`update`."""

    def __init__(self):
        for name, default in _OPTIONS.items():
            setattr(self, name, _from_env(name, default))

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        for flag, sources in _DERIVED.items():
            if name in sources:
                object.__setattr__(self, flag, any(getattr(self, s, False) for s in sources))

    def update(self, name: str, value) -> None:
        """Set option ``name`` (JAX's ``jax.config.update``; JAX's ``jax_*`` names work too)."""
        name = _canonical(name, "update")
        default = _OPTIONS[name]
        if isinstance(default, bool):
            if not isinstance(value, (bool, int)):
                raise TypeError(f"config.update: option {name!r} takes a bool, got {value!r}")
            value = bool(value)
        elif default is not None:
            value = type(default)(value)
        _check_value(name, value, "config.update")
        setattr(self, name, value)

    def read(self, name: str):
        """The current value of option ``name``."""
        return getattr(self, _canonical(name, "read"))

    @property
    def values(self) -> dict:
        """Every option's current value, under JAX's names where JAX has the option."""
        out = {k: getattr(self, k) for k in _OPTIONS}
        out.update({alias: getattr(self, target) for alias, target in _ALIASES.items()})
        return out

    def __getattr__(self, name: str):
        # Only reached for names that are not attributes: JAX's ``config.jax_enable_x64``.
        target = _ALIASES.get(name)
        if target is None:
            raise AttributeError(
                f"fungrad.config has no option {name!r}; known options: "
                f"{', '.join(sorted(_OPTIONS) + sorted(_ALIASES))}"
            )
        return getattr(self, target)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in _OPTIONS)
        return f"Config({items})"


config = Config()
