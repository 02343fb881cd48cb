"""``config.update("log_compiles", True)``: one log record per compile, whatever path compiled.

Every compile of a jitted program logs (logger ``fungrad.jit``, level WARNING, as JAX logs
``jax_log_compiles``) the function's name, its signature, the backend, the total seconds and
the seconds of each phase: ``trace`` (tracing and simplifying the function, when this compile
traced it), then the executable's own phases (``optimize``, ``plan``, ``render`` -- LLVM IR or
WGSL -- and ``compile``: LLVM's code generation and loading, or the GPU driver's pipelines).

The paths: a top-level call of ``jit(f)`` and ``jit(f).lower(...).compile()``
(``jit_cache.JitFunction``), a jitted function whose call primitive is evaluated eagerly
inside a transform (``grad(jit(f))``, ``vmap(jit(f))``: ``jit_primitive.executable``), and the
profiled builds ``fungrad.profile()`` runs. The record's extra attributes ``fungrad_function``
(the name) and ``fungrad_phases`` (phase -> seconds) carry the numbers for tools; on the CPU,
``fungrad_compile_detail`` splits ``compile`` into LLVM's passes (parse, verify, optimise),
code generation, loading and ``setup`` (the rest: the process's first compile also builds the
runtime libraries generated code links to), and says whether the objects came from the
on-disk compile cache.
"""

from __future__ import annotations

import logging

__all__ = ["log_compile", "logger"]

logger = logging.getLogger("fungrad.jit")


def log_compile(
    label: str, name: str, paths, in_avals, backend: str, exe, total_s: float, trace_s=None
) -> None:
    """Log one compile of ``exe`` (see the module docstring): ``label`` names what compiled
    (``jit(f)``, ``jit(f) inside a transform``), ``name`` the function, ``paths`` its arguments
    (None: ``arg0``, ``arg1``...), ``total_s`` the seconds the executable took, ``trace_s``
    the tracing seconds (None when this compile did not trace)."""
    phases = {} if trace_s is None else {"trace": trace_s}
    phases.update(getattr(exe, "phase_times", {}))
    paths = list(paths) if paths is not None else [f"arg{i}" for i in range(len(in_avals))]
    sig = ", ".join(f"{p}: {a.str_short()}" for p, a in zip(paths, in_avals))
    detail = getattr(exe, "compile_detail", None)
    inner = ""
    if detail:  # the CPU's compile phase: LLVM's passes, code generation, loading
        inner = "; compile = " + ", ".join(
            f"{k} {v:.4f} s" for k, v in detail.items() if not isinstance(v, bool)
        )
        inner += " (from the compile cache)" if detail.get("cache_hit") else ""
    logger.warning(
        "Compiling %s for (%s) on %s in %.4f s (%s%s)",
        label,
        sig,
        backend,
        (trace_s or 0.0) + total_s,
        ", ".join(f"{k} {v:.4f} s" for k, v in phases.items()),
        inner,
        extra={
            "fungrad_phases": phases,
            "fungrad_function": name,
            "fungrad_compile_detail": dict(detail or {}),
        },
    )
