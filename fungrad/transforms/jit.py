"""``jit``: compile a whole function to one native function (``jax.jit``).

    jit : (a -> b) -> (a -> b)

``jit(f)`` traces ``f`` abstractly into a ClosedJaxpr once per *signature* (the pytree structure
of the arguments, their avals including weak types, the static arguments' values, the backend
and ``enable_x64``), compiles it with ``fungrad.lowering.compile_jaxpr`` and caches both.

* At the top level (no transform active, every argument concrete) a call is one dict lookup
  keyed by the arguments' avals followed by ``exe.call``: the compiled function runs without
  ``bind``.
* Inside a transform (grad, vmap, an outer jit, a lax.scan body...) the call binds the ``jit``
  call primitive, ``jit_p``, whose params are the traced ``jaxpr`` and the function's ``name``.
  Its rules (fungrad/transforms/jit_primitive.py) transform that jaxpr and bind ``jit_p``
  again, so ``grad(jit(f))``, ``jit(grad(f))``, ``vmap(jit(f))`` and ``jit(jit(f))`` all
  compose, and each piece still runs compiled. Transformed jaxprs are memoised per jaxpr
  object, so ``grad(jit(f))`` evaluated eagerly compiles its forward and backward parts once,
  not once per call.

Beyond JAX: ``config.update("explain_recompiles", True)`` logs (logger ``fungrad.jit``, level
WARNING) why a jitted function was traced again, naming the argument (by pytree path) whose
shape, dtype, weak type or static value changed, or the change of pytree structure; and a
function traced more than ``config.jit_retrace_warning_threshold`` times (8; 0 turns it off)
gets one :class:`RetraceWarning` naming it and the last change.

Each jitted function keeps at most ``config.jit_cache_max_entries`` (4096, as JAX) signatures
with their executables, dropping the least recently used: a function called with thousands of
shapes no longer keeps thousands of compiled programs (~70 KB each). The hot paths do not record
their hits (that would cost every call); instead, whenever a new signature enters a full cache,
their tables are emptied, so each signature's next call takes the general path once and
refreshes its place: the order is exact up to calls since the last new signature.

This module is the public function and its hot paths; the per-function cache, argument
handling and retrace explanations are fungrad/transforms/jit_cache.py, ahead-of-time
``lower``/``compile`` fungrad/transforms/aot.py.
"""

from __future__ import annotations

import functools
from typing import Any

from fungrad import core
from fungrad.array import Array
from fungrad.config import config
from fungrad.core import EvalTrace
from fungrad.transforms import aot, jit_shardings
from fungrad.transforms.api_util import check_callable
from fungrad.transforms.jit_cache import JitFunction, check_backend, tree_key

__all__ = ["jit"]

_aval_of = Array._aval.__get__  # the cached aval of an Array; a TypeError for anything else
_trace_state = core._state


class _NotSpecified:
    """jit's ``fun`` when it is omitted (``jit(static_argnums=0)`` returns a decorator); an
    explicit None is an error, as in JAX."""

    def __repr__(self):
        return "NotSpecified"


_NOT_SPECIFIED = _NotSpecified()


def jit(
    fun=_NOT_SPECIFIED,
    *,
    static_argnums=(),
    static_argnames=(),
    donate_argnums=(),
    donate_argnames=(),
    keep_unused=False,
    device=None,
    backend=None,
    inline=False,
    compiler_options=None,
    in_shardings=jit_shardings.UNSPECIFIED,
    out_shardings=jit_shardings.UNSPECIFIED,
) -> Any:
    """Compile ``fun`` to one native function per signature (``jax.jit``).

    Args:
      fun: a function of arrays (pytrees of them) returning arrays (pytrees of them). Without
        ``fun``, ``jit(**options)`` returns a decorator.
      static_argnums: positional arguments passed to ``fun`` as Python values: they must be
        hashable, and each new value traces and compiles ``fun`` again. Negative numbers count
        from the end of each call's positional arguments.
      static_argnames: the same, by parameter name (a parameter named in either is static
        whether passed by position or by keyword).
      donate_argnums: positional arguments whose Arrays the call consumes: after the call they
        are deleted (any use raises RuntimeError), which lets the caller give up buffers it no
        longer needs. Ignored under transforms, as in JAX.
      donate_argnames: the same, by parameter name (completed from and into donate_argnums
        as static_argnames is).
      backend: ``None`` or ``"cpu"`` (native code through LLVM), or ``"gpu"`` (WGSL compute
        shaders through WebGPU: Vulkan, Metal, DirectX 12; float32/int32/uint32/bool
        programs). GPU results are :class:`~fungrad.devices.GpuArray` s: they stay on the
        device, and passing them to another GPU function copies nothing.
      keep_unused: accepted for JAX's signature; fungrad always passes every argument to the
        compiled program (unused ones cost nothing), so it changes nothing.
      device: a device from ``fungrad.devices()``: its platform picks the backend (``cpu`` or
        ``gpu``); give ``device`` or ``backend``, not both (JAX's ValueError).
      inline: called while another function is traced (inside jit, grad, vmap...), run ``fun``
        in that trace instead of binding a nested jit call, as JAX inlines it into the
        enclosing jaxpr. Called at top level it compiles as usual.
      compiler_options: XLA's per-compilation flags; fungrad compiles with LLVM and takes
        none, so only ``None`` or an empty dict are accepted (any option raises a ValueError
        naming it, as XLA rejects an option it does not know).
      in_shardings, out_shardings: ``jax.sharding`` Shardings or PartitionSpecs (pytree
        prefixes of the non-static positional arguments and of the results) checked as JAX
        checks them; the results carry ``out_shardings`` (fungrad/transforms/jit_shardings.py).

    Returns:
      A function with the signature of ``fun`` (``functools.wraps``), plus ``lower(*args,
      **kwargs) -> Lowered``, ``clear_cache()``, ``_cache_size()`` (signatures kept, as JAX)
      and ``cache_info()`` (hits, misses, maxsize, currsize: a
      :class:`~fungrad.transforms.jit_cache.CacheInfo`).

    Example::

        @fg.jit
        def f(x):
            return fnp.tanh(x) * 2 + 1

        f(fnp.ones(3))                       # traced and compiled, then run natively
        fg.jit(f).lower(fnp.ones(3)).as_text()
    """
    if fun is _NOT_SPECIFIED:
        return functools.partial(
            jit,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            donate_argnums=donate_argnums,
            donate_argnames=donate_argnames,
            keep_unused=keep_unused,
            device=device,
            backend=backend,
            inline=inline,
            compiler_options=compiler_options,
            in_shardings=in_shardings,
            out_shardings=out_shardings,
        )
    check_callable(fun, "jit", "pass the function to compile: jit(f), or use @jit")
    backend = _device_backend(device, backend)
    if compiler_options:
        raise ValueError(
            f"jit: compiler_options {sorted(compiler_options)} are XLA flags; fungrad compiles "
            "with LLVM and takes no compiler options: remove compiler_options"
        )
    info = JitFunction(
        fun,
        static_argnums,
        static_argnames,
        donate_argnums,
        donate_argnames,
        check_backend(backend),
    )
    general = info.call

    if info.has_options:
        fast, layouts = info.fast, info.layouts
        state, cfg = _trace_state, config
        aval_of = _aval_of

        def jitted(*args, **kwargs):
            # The hot path with static or donated arguments: the key holds each static value
            # (with its type) and each dynamic Array's aval.
            if type(state.trace) is EvalTrace and not kwargs and not cfg.jit_general_only:
                n = len(args)
                layout = layouts.get(n)
                if layout is not None:
                    try:
                        hit = fast[config.enable_x64].get(
                            (
                                n,
                                *[
                                    (type(a), a) if static else aval_of(a) or a.aval
                                    for a, static in zip(args, layout)
                                ],
                            )
                        )
                    except TypeError:  # a non-Array dynamic argument, an unhashable static one
                        hit = None
                    if hit is not None:
                        call, tree, dyn_idx, donated = hit
                        outs = call([args[i] for i in dyn_idx])
                        for i in donated:
                            args[i].delete()
                        return outs[0] if tree is None else tree.unflatten(outs)
            return general(args, kwargs)
    else:
        fast, last, trees = info.fast, info.last, info.fast_trees
        state, cfg = _trace_state, config
        aval_of = _aval_of

        def jitted(*args, **kwargs):
            # The hot path: Arrays only, no transform active, a signature seen before. A
            # one-argument function first compares the aval with the last one by identity,
            # skipping the dict's (Python-level) ShapedArray hash.
            if type(state.trace) is EvalTrace and not kwargs and not cfg.jit_general_only:
                x64 = config.enable_x64
                try:
                    if len(args) == 1:
                        key = aval_of(args[0]) or args[0].aval
                        seen = last[x64]
                        if seen[0] is key:
                            hit = seen[1]
                        else:
                            hit = fast[x64].get(key)
                            if hit is not None:
                                last[x64] = (key, hit)
                    else:
                        hit = fast[x64].get(tuple(map(aval_of, args)))
                        if hit is None:  # some Array has not computed its aval yet
                            hit = fast[x64].get(tuple([a.aval for a in args]))
                except TypeError:  # not all Arrays
                    hit = None
                if hit is not None:
                    outs = hit[0](args)
                    tree = hit[1]
                    return outs[0] if tree is None else tree.unflatten(outs)
                try:  # pytrees of Arrays
                    leaves: list = []
                    hit = trees[x64].get(tuple([tree_key(a, leaves) for a in args]))
                except TypeError:
                    hit = None
                if hit is not None:
                    outs = hit[0](leaves)
                    tree = hit[1]
                    return outs[0] if tree is None else tree.unflatten(outs)
            return general(args, kwargs)

    def lower(*args, **kwargs) -> aot.Lowered:
        """Trace (or find in the cache) the function for these arguments: a :class:`Lowered`,
        whose ``as_text()`` shows the compiled program and ``compile()`` gives it."""
        return aot.lower(info, args, kwargs)

    def trace(*args, **kwargs) -> aot.TracedStage:
        """Trace the function for these arguments (JAX's AOT ``trace`` stage): ``.jaxpr``,
        ``.out_info``, and ``.lower()`` then ``.compile()``."""
        return aot.trace(info, args, kwargs)

    if inline:
        compiled = jitted

        def jitted(*args, **kwargs):
            # inside another trace, fun runs in it (JAX inlines it into the enclosing jaxpr)
            if type(state.trace) is not EvalTrace and not cfg.disable_jit:
                return fun(*args, **kwargs)
            return compiled(*args, **kwargs)

    functools.update_wrapper(jitted, fun)
    jitted.lower = lower
    jitted.trace = trace
    jitted.clear_cache = info.clear_cache
    jitted.cache_info = info.cache_info
    jitted._cache_size = lambda: len(info.cache)
    if not (in_shardings is out_shardings is jit_shardings.UNSPECIFIED):
        return jit_shardings.with_shardings(
            jitted, fun, in_shardings, out_shardings, static_argnums, static_argnames
        )
    return jitted


def _device_backend(device, backend):
    """The backend jit's ``device`` argument picks (its platform), or ``backend`` unchanged."""
    if device is None:
        return backend
    if backend is not None:
        raise ValueError("can't specify both a device and a backend for jit")
    platform = getattr(device, "platform", None)
    if platform not in ("cpu", "gpu"):
        raise TypeError(
            f"jit: device must be a device from fungrad.devices() (or None), got {device!r}"
        )
    return platform
