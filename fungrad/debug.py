"""Printing and callbacks that work inside transformed and compiled code (``jax.debug``).

``print("x={x}", x=x)`` formats its arguments with ``str.format`` when the program runs, so it
shows the values a jitted function computes, not tracers; ``callback(fn, *args)`` calls any
Python function with the values. Both are ``fungrad.callback``'s ``debug_callback``: never
dropped as dead code, called with the primal values under ``grad`` (during the forward
pass), once per example under ``vmap`` (as in JAX), and once per iteration inside compiled
loops. fungrad keeps every callback in program order, so ``ordered=True`` is always honoured.
"""

from __future__ import annotations

import string
import sys

import numpy as np

from fungrad.callback import debug_callback_p, flatten_args

__all__ = ["print", "callback"]


def _one_or_two_calls(name: str, first: str, call, given, args, kwargs):
    """JAX's two forms of ``name``: ``name(first, *args)`` calls ``call`` now (None), and
    ``name(ordered=...)`` with nothing else returns ``call`` for ``(first, *args)``."""
    if given is not None:
        call(given, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(
            f"fungrad.debug.{name}: the two-call form {name}(ordered=...)({first}, "
            f"*args) takes no other arguments in its first call; got "
            f"args={args} kwargs={kwargs}"
        )
    return call


def callback(callback=None, *args, ordered: bool = False, partitioned: bool = False, **kwargs):
    """Call ``callback(*args, **kwargs)`` with the values of ``args`` when the program runs
    (``jax.debug.callback``); returns None. ``callback`` receives fungrad Arrays in the
    pytree structure of the arguments; leaves that are not arrays or numbers (strings,
    objects) are passed as they are. Two-call form: ``callback(ordered=True)(fn, *args)``.
    ``partitioned`` is accepted for JAX's signature (fungrad has one device)."""
    del partitioned

    def call(fn, *c_args, **c_kwargs):
        operands, flat = flatten_args("fungrad.debug.callback", fn, c_args, c_kwargs)
        debug_callback_p.bind(*operands, callback=flat, ordered=bool(ordered))

    return _one_or_two_calls("callback", "fn", call, callback, args, kwargs)


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments without formatting values."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(
                f"fungrad.debug.print: unused positional arguments {unused}; "
                "every argument needs a {} field in the format string"
            )
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(
                f"fungrad.debug.print: unused keyword arguments {unused_kw}; name them in "
                "the format string ('x={x}'). An f-string (f\"{x}\") is formatted before "
                "print sees it: pass a plain string and the values as arguments instead."
            )


_checker = _FormatChecker()


def _printer(fmt: str, printoptions: dict, has_placeholders: bool):
    def show(*args, **kwargs):
        args = [np.asarray(a) if hasattr(a, "__array__") else a for a in args]
        kwargs = {k: np.asarray(v) if hasattr(v, "__array__") else v for k, v in kwargs.items()}
        with np.printoptions(**printoptions):
            if has_placeholders:
                msg = fmt.format(*args, **kwargs)
            else:
                msg = " ".join([fmt, *map(str, args)])
        sys.stdout.write(msg + "\n")

    show.__qualname__ = f"print({fmt!r})"
    return show


def print(
    fmt=None,
    *args,
    ordered: bool = False,
    partitioned: bool = False,  # noqa: A001
    skip_format_check: bool = False,
    **kwargs,
):
    """Print ``fmt.format(*args, **kwargs)`` with the values of the arguments when the
    program runs (``jax.debug.print``), in jitted, vmapped, differentiated and looping code.
    Write ``print("x={x}", x=x)``, not an f-string (which would format a tracer while
    tracing). Arguments the format string does not use are a ValueError (unless
    ``skip_format_check``); numpy's print options in force at the call apply. Two-call form:
    ``print(ordered=True)("x={x}", x=x)``."""
    del partitioned

    def do_print(fmt: str, *c_args, **c_kwargs):
        if not isinstance(fmt, str):
            raise TypeError(
                f"fungrad.debug.print: the format must be a str, got {type(fmt).__name__}"
            )
        if not skip_format_check:
            _checker.format(fmt, *c_args, **c_kwargs)
        has_placeholders = bool(fmt) and next(iter(string.Formatter().parse(fmt)))[1] is not None
        show = _printer(fmt, dict(np.get_printoptions()), has_placeholders)
        operands, flat = flatten_args("fungrad.debug.print", show, c_args, c_kwargs)
        debug_callback_p.bind(*operands, callback=flat, ordered=bool(ordered))

    return _one_or_two_calls("print", "fmt", do_print, fmt, args, kwargs)
