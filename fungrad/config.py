"""Global configuration, spelled as JAX spells it: ``fungrad.config.update("enable_x64", True)``.

Options are plain attributes of one ``Config`` object so hot paths read them with a single
attribute lookup. Each option can also be set from the environment (``FUNGRAD_ENABLE_X64=1``)
before import.
"""

from __future__ import annotations

import os

_OPTIONS = {
    # 64-bit floats and ints; off by default, as in JAX (64-bit inputs become 32-bit).
    "enable_x64": False,
    # Check, after every eager primitive, that its numpy impl produced the shape and
    # dtype that its abstract_eval predicts. The test suite turns it on; it is cheap
    # enough to use while debugging a new primitive.
    "check_impl_avals": False,
    # Do not read or write the on-disk cache of compiled CPU code (fungrad/lowering/cache.py);
    # the environment variable FUNGRAD_DISABLE_CACHE=1 does the same.
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
}


def _from_env(name: str, default):
    raw = os.environ.get("FUNGRAD_" + name.upper())
    if raw is None:
        return default
    if isinstance(default, bool):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    return type(default)(raw)


class Config:
    """Holds every option as an attribute; change them with :meth:`update`."""

    def __init__(self):
        for name, default in _OPTIONS.items():
            setattr(self, name, _from_env(name, default))

    def update(self, name: str, value) -> None:
        """Set option ``name`` (JAX's ``jax.config.update``)."""
        if name not in _OPTIONS:
            known = ", ".join(sorted(_OPTIONS))
            raise ValueError(f"config.update: unknown option {name!r}; known options: {known}")
        default = _OPTIONS[name]
        if isinstance(default, bool) and not isinstance(value, (bool, int)):
            raise TypeError(f"config.update: option {name!r} takes a bool, got {value!r}")
        setattr(self, name, type(default)(value))

    def read(self, name: str):
        """The current value of option ``name``."""
        if name not in _OPTIONS:
            raise ValueError(f"config.read: unknown option {name!r}")
        return getattr(self, name)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in _OPTIONS)
        return f"Config({items})"


config = Config()
