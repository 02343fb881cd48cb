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
  Its rules, below, transform that jaxpr and bind ``jit_p`` again, so ``grad(jit(f))``,
  ``jit(grad(f))``, ``vmap(jit(f))`` and ``jit(jit(f))`` all compose, and each piece still runs
  compiled. Transformed jaxprs are memoised per jaxpr object, so ``grad(jit(f))`` evaluated
  eagerly compiles its forward and backward parts once, not once per call.

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
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import warnings
from collections import OrderedDict
from typing import Any

import numpy as np

from fungrad import core, tree_util
from fungrad.array import Array
from fungrad.config import config
from fungrad.core import EvalTrace, set_current_trace
from fungrad.devices import GpuArray
from fungrad.ir.passes import jaxpr_has_effects, simplify
from fungrad.transforms.jvp import Zero, jvp_jaxpr, jvp_rules, tangent_aval
from fungrad.transforms.partial_eval import partial_eval_jaxpr, partial_eval_rules
from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr
from fungrad.transforms.transpose import (
    UndefPrimal,
    backward_pass,
    is_undefined_primal,
    transpose_rules,
)
from fungrad.transforms.vmap import (
    batch_jaxpr,
    batch_rules,
    current_rule_axis_name,
    moveaxis,
)

__all__ = ["Compiled", "Lowered", "RetraceWarning", "jit", "jit_p"]

BACKENDS = ("cpu", "gpu")
"""The backends ``jit`` compiles for: native code through LLVM, WGSL through WebGPU."""

logger = logging.getLogger("fungrad.jit")


class RetraceWarning(UserWarning):
    """A jitted function was traced (and compiled) again more often than
    ``config.jit_retrace_warning_threshold`` allows."""


# -- computing a value once, whichever threads ask ------------------------------------------------

class _Once:
    """A value made at most once, even when several threads ask for it at the same time: the
    first caller makes it while the others wait on the lock. A failure is not kept (the next
    caller tries again), so errors are never cached."""

    __slots__ = ("lock", "done", "value")

    def __init__(self):
        self.lock = threading.RLock()
        self.done = False
        self.value = None

    def get(self, make):
        if self.done:
            return self.value
        with self.lock:
            if not self.done:
                self.value = make()
                self.done = True
        return self.value


class _JaxprMemo:
    """Values derived from a ClosedJaxpr (its jvp, batched, partially evaluated or transposed
    jaxpr; its executable), memoised per jaxpr *object* and made once each.

    NB: ClosedJaxpr has no ``__weakref__`` slot, so this is keyed by ``id(jaxpr)`` with the
    jaxpr kept alive by its entry (so the id cannot be reused), in an LRU bounded to
    ``maxsize`` entries (JAX bounds the same memos, with weak keys).
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: OrderedDict = OrderedDict()

    def get(self, jaxpr: core.ClosedJaxpr, extra, make):
        key = (id(jaxpr), extra)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = (jaxpr, _Once())
                if len(self._entries) > self.maxsize:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        return entry[1].get(make)

    def clear(self):
        with self._lock:
            self._entries.clear()


_memo = _JaxprMemo(2048)
"""Transformed jaxprs (small)."""

_exe_memo = _JaxprMemo(128)
"""Executables of jaxprs bound as ``jit`` equations outside the hot path (transformed jaxprs
evaluated eagerly, jit calls inside eagerly run control flow). ~200 KB of machine code each,
hence the smaller bound; the hot path keeps its executables on the jitted function instead."""


# -- the call primitive and its rules -------------------------------------------------------------

def _compile(jaxpr: core.ClosedJaxpr, backend: str, name: str):
    from fungrad import lowering
    # Compiling is concrete work: no transform may see the passes' own computations.
    with set_current_trace(EvalTrace()):
        return lowering.compile_jaxpr(jaxpr, backend=backend, name=name)


def _executable(jaxpr: core.ClosedJaxpr, name: str, backend: str = "cpu"):
    """The executable of ``jaxpr``, compiled once per jaxpr object and backend."""
    return _exe_memo.get(jaxpr, backend, lambda: _compile(jaxpr, backend, name))


def _backend_param(backend: str) -> dict:
    """The jit equation's ``backend`` param: absent for the default CPU (jaxprs print as
    before), ``backend='gpu'`` otherwise."""
    return {} if backend == "cpu" else {"backend": backend}


def _jit_impl(*args, jaxpr, name, backend="cpu"):
    exe = _executable(jaxpr, name, backend)
    return [o._value for o in exe.call(list(args))]


def _jit_abstract_eval(*avals, jaxpr, name, backend="cpu"):
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(
            a.strip_weak_type() != b.strip_weak_type() for a, b in zip(avals, expected)):
        got = ", ".join(a.str_short() for a in avals)
        want = ", ".join(a.str_short() for a in expected)
        raise TypeError(f"jit[name={name}]: the jaxpr takes ({want}) but the call passes "
                        f"({got})")
    return jaxpr.out_avals


jit_p = core.Primitive("jit", multiple_results=True)
jit_p.impl = _jit_impl
jit_p.abstract_eval = _jit_abstract_eval


def _jit_jvp(primals, tangents, *, jaxpr, name, backend="cpu"):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jvp_j, out_nz = _memo.get(jaxpr, ("jvp", nonzeros),
                              lambda: jvp_jaxpr(jaxpr, nonzeros, instantiate=False))
    outs = jit_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                      jaxpr=jvp_j, name=name, **_backend_param(backend))
    n = len(jaxpr.out_avals)
    t_it = iter(outs[n:])
    return outs[:n], [next(t_it) if nz else Zero(tangent_aval(a))
                      for nz, a in zip(out_nz, jaxpr.out_avals)]


def _jit_partial_eval(trace, args, params):
    # The known part runs now, as a jit call in the enclosing trace (compiled when that is the
    # eager one); the unknown part is staged as a jit equation reading the residuals.
    jaxpr, name = params["jaxpr"], params["name"]
    where = _backend_param(params.get("backend", "cpu"))
    unknowns = tuple(trace.is_unknown(a) for a in args)
    known_j, unknown_j, out_uk, n_res = _memo.get(
        jaxpr, ("partial_eval", unknowns),
        lambda: partial_eval_jaxpr(jaxpr, unknowns, instantiate=False))
    known_out = []
    # A part with no outputs still runs when it has effects (a debug.print inside the jit).
    if known_j.out_avals or jaxpr_has_effects(known_j.jaxpr):
        with set_current_trace(trace.parent):
            known_out = jit_p.bind(*[a for a, u in zip(args, unknowns) if not u],
                                   jaxpr=known_j, name=name, **where)
    n_known = len(known_out) - n_res
    residuals = known_out[n_known:]
    unknown_out = []
    if any(out_uk) or jaxpr_has_effects(unknown_j.jaxpr):
        unknown_out = trace.stage(jit_p, [*residuals, *[a for a, u in zip(args, unknowns) if u]],
                                  dict(jaxpr=unknown_j, name=name, **where))
    k_it, u_it = iter(known_out[:n_known]), iter(unknown_out)
    return [next(u_it) if u else next(k_it) for u in out_uk]


def _transpose_jaxpr(jaxpr: core.ClosedJaxpr, linear, ct_nonzero):
    """The transpose of ``jaxpr`` as a jaxpr taking ``(*non-linear inputs, *nonzero output
    cotangents)`` and returning the nonzero cotangents of the linear inputs; also returns which
    of the linear inputs' cotangents are nonzero."""
    res_avals = [a for a, lin in zip(jaxpr.in_avals, linear) if not lin]
    ct_avals = [tangent_aval(a) for a, nz in zip(jaxpr.out_avals, ct_nonzero) if nz]
    out_nz: list[bool] = []

    def transposed(*xs):
        res, cts = iter(xs[:len(res_avals)]), iter(xs[len(res_avals):])
        args = [UndefPrimal(a) if lin else next(res) for a, lin in zip(jaxpr.in_avals, linear)]
        cts_out = [next(cts) if nz else Zero(tangent_aval(a))
                   for a, nz in zip(jaxpr.out_avals, ct_nonzero)]
        cts_in = backward_pass(jaxpr.jaxpr, jaxpr.consts, args, cts_out)
        lin_cts = [ct for ct, lin in zip(cts_in, linear) if lin]
        out_nz[:] = [ct is not None and type(ct) is not Zero for ct in lin_cts]
        return [ct for ct, nz in zip(lin_cts, out_nz) if nz]

    closed = trace_to_jaxpr(transposed, res_avals + ct_avals)
    return closed, tuple(out_nz)


def _jit_transpose(cts, *args, jaxpr, name, backend="cpu"):
    linear = tuple(is_undefined_primal(a) for a in args)
    ct_nonzero = tuple(type(ct) is not Zero for ct in cts)
    zeros = [Zero(tangent_aval(a.aval)) if lin else None for a, lin in zip(args, linear)]
    if not any(ct_nonzero):
        return zeros
    t_jaxpr, out_nz = _memo.get(jaxpr, ("transpose", linear, ct_nonzero),
                                lambda: _transpose_jaxpr(jaxpr, linear, ct_nonzero))
    outs = iter(jit_p.bind(*[a for a, lin in zip(args, linear) if not lin],
                           *[ct for ct in cts if type(ct) is not Zero],
                           jaxpr=t_jaxpr, name=name, **_backend_param(backend))
                if any(out_nz) else [])
    nz_it = iter(out_nz)
    return [(next(outs) if next(nz_it) else z) if lin else None
            for z, lin in zip(zeros, linear)]


def _jit_batch(axis_size, args, dims, *, jaxpr, name, backend="cpu"):
    batched = tuple(d is not None for d in dims)
    # The axis name is part of the key: a collective over it is reduced by that vmap only.
    new_j, out_b = _memo.get(jaxpr, ("batch", axis_size, batched, current_rule_axis_name()),
                             lambda: batch_jaxpr(jaxpr, axis_size, batched, instantiate=False))
    vals = [x if d is None else moveaxis(x, d, 0) for x, d in zip(args, dims)]
    outs = jit_p.bind(*vals, jaxpr=new_j, name=name, **_backend_param(backend))
    return outs, [0 if b else None for b in out_b]


jvp_rules[jit_p] = _jit_jvp
partial_eval_rules[jit_p] = _jit_partial_eval
transpose_rules[jit_p] = _jit_transpose
batch_rules[jit_p] = _jit_batch


# -- argument handling ----------------------------------------------------------------------------

def check_callable(fun, transform: str, usage: str) -> None:
    """A TypeError unless ``fun`` is callable, raised where a transform is applied (as JAX's
    "Expected a callable value"), naming the transform and how to call it (``usage``)."""
    if not callable(fun):
        raise TypeError(f"{transform}: expected a callable value, got {fun!r:.60} (of type "
                        f"{type(fun).__name__}); {usage}")


def _fun_name(fun) -> str:
    while isinstance(fun, functools.partial):
        fun = fun.func
    return getattr(fun, "__name__", type(fun).__name__)


def _fun_location(fun) -> str:
    while isinstance(fun, functools.partial):
        fun = fun.func
    code = getattr(inspect.unwrap(fun), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "<unknown>"


def _index_tuple(what: str, value, kind, fun_name: str = "jit") -> tuple:
    """``static_argnums``-like options as a tuple: one ``kind`` (int or str) or a sequence of
    them; anything else is a TypeError naming ``fun_name`` and the option."""
    noun = "int" if kind is int else "string"
    if isinstance(value, kind) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        items = None
    else:
        items = tuple(value)
    if items is None or any(not isinstance(v, kind) or isinstance(v, bool) for v in items):
        raise TypeError(f"{fun_name}: {what} must be {'an' if kind is int else 'a'} {noun} or a "
                        f"sequence of {noun}s, got "
                        f"{value!r:.60} ({type(value).__name__})")
    return items


def _check_backend(backend) -> str:
    if backend is None or backend == "cpu":
        return "cpu"
    if backend == "gpu":
        return "gpu"
    raise ValueError(f"jit: backend {backend!r} is not available; the supported backends are "
                     f"{', '.join(map(repr, BACKENDS))} (or None for the default, 'cpu')")


class Signature:
    """What jit knows of ``fun``'s parameters: the names of its positional parameters (to name
    arguments in messages and relate static_argnums to static_argnames, as JAX does), whether
    it takes ``*args`` and ``**kwargs``."""

    def __init__(self, fun):
        try:
            params = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):  # builtins without a signature: no names, no checks
            params = None
        self.known = params is not None
        params = params or []
        kinds = inspect.Parameter
        self.positional = [p.name for p in params
                           if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
        self.keyword = {p.name for p in params
                        if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}
        self.var_positional = next((p.name for p in params if p.kind is kinds.VAR_POSITIONAL),
                                   None)
        self.var_keyword = any(p.kind is kinds.VAR_KEYWORD for p in params)
        # positional-or-keyword parameters: the ones reachable both ways
        self.both = [p.name for p in params if p.kind is kinds.POSITIONAL_OR_KEYWORD]

    def arg_name(self, i: int) -> str:
        if i < len(self.positional):
            return self.positional[i]
        if self.var_positional:
            return f"{self.var_positional}[{i - len(self.positional)}]"
        return f"args[{i}]"


def _resolve_argnums(sig: Signature, what: str, nums, names) -> tuple[tuple, frozenset]:
    """Validate ``{what}_argnums`` / ``{what}_argnames`` against the signature and complete each
    from the other (JAX: a static positional parameter is also static when passed by keyword)."""
    if sig.known and not sig.var_positional:
        for i in nums:
            j = i + len(sig.positional) if i < 0 else i
            if not 0 <= j < len(sig.positional):
                raise ValueError(f"Jitted function has {what}_argnums={nums}, but only accepts "
                                 f"{len(sig.positional)} positional arguments.")
    if sig.known and not sig.var_keyword:
        bad = set(names) - sig.keyword
        if bad:
            raise ValueError(f"Jitted function has invalid argnames {bad} in {what}_argnames. "
                             "Function does not take these args.")
    names = set(names)
    nums = list(nums)
    for i in list(nums):
        j = i + len(sig.positional) if i < 0 and not sig.var_positional else i
        if 0 <= j < len(sig.positional) and sig.positional[j] in sig.both:
            names.add(sig.positional[j])
    for n in list(names):
        if n in sig.both:
            k = sig.positional.index(n)
            if k not in nums:
                nums.append(k)
    return tuple(nums), frozenset(names)


def _as_operand(x, info: _JitFunction, path_of):
    """A dynamic argument leaf as an Array or tracer (canonical dtype, weak Python scalars);
    ``path_of()`` names the argument in the error for anything else."""
    if type(x) in _HOT_TYPES or isinstance(x, core.Tracer):  # GpuArrays stay on the GPU
        return x
    ok_numpy = isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "biuf"
    if ok_numpy or (isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)):
        from fungrad.operands import operand
        return operand(x, f"jit({info.name}) argument")
    path = path_of()
    arg = path.split("[")[0].split(".")[0]
    if arg in info.sig.positional:
        hint = f"static_argnums={info.sig.positional.index(arg)}"
    elif arg in info.sig.keyword:
        hint = f"static_argnames={arg!r}"
    else:
        hint = "static_argnums=..."
    raise TypeError(
        f"jit({info.name}): argument {path} is a {type(x).__name__} ({x!r:.60}), not an array. "
        f"Arguments of a jitted function must be arrays, numpy values or Python scalars (or "
        f"pytrees of them). Mark configuration values static instead, e.g. "
        f"jit({info.name}, {hint}).")


_LEAF_TYPES = frozenset({Array, float, int, bool, np.ndarray, np.float32, np.float64, np.int32,
                         np.int64, np.bool_})
"""Types that are pytree leaves, so calls passing only these skip ``tree_flatten``."""


def _unhashable_error(name: str, value, err) -> ValueError:
    # NB: JAX raises ValueError here (not TypeError); its message is followed.
    return ValueError(
        f"Non-hashable static arguments are not supported. An error occurred while trying to "
        f"hash an object of type {type(value)}, {value!r:.80}, passed as static argument "
        f"{name}. The error was:\n{type(err).__name__}: {err}\nPass a hashable value (a tuple "
        "instead of a list, ...) or make the argument dynamic (an array).")


# -- one jitted function --------------------------------------------------------------------------

class _Call:
    """One call's arguments split into static values and dynamic leaves."""

    __slots__ = ("args", "kwargs", "info", "static_pos", "static_kw", "static_key", "leaves",
                 "in_tree")

    @property
    def dyn_names(self) -> list[str]:
        """The names of the dynamic positional arguments."""
        return [self.info.sig.arg_name(i) for i in range(len(self.args))
                if i not in self.static_pos]

    def leaf_paths(self) -> list[str]:
        pos_tree, kw_tree = self.in_tree.children
        paths = []
        for name, sub in zip(self.dyn_names, pos_tree.children):
            paths += tree_util._leaf_paths(sub, name)
        for key, sub in zip(kw_tree.node_data, kw_tree.children):
            paths += tree_util._leaf_paths(sub, key)
        return paths


class _Traced:
    """A traced signature: the jaxpr, the output treedef, the executable (made on first use)."""

    __slots__ = ("jaxpr", "out_tree", "hoisted", "compiled", "paths")

    def __init__(self, jaxpr, out_tree, hoisted, paths):
        self.jaxpr = jaxpr
        self.out_tree = out_tree
        self.hoisted = hoisted          # tracers of enclosing transforms the function closes over
        self.compiled = _Once()
        self.paths = paths              # readable paths of the dynamic leaves


class _JitFunction:
    """The state behind one ``jit(f)``: options, the trace cache and the fast-path tables."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                 backend):
        self.fun = fun
        self.name = _fun_name(fun)
        self.backend = backend
        self.sig = Signature(fun)
        self.static_nums, self.static_names = _resolve_argnums(
            self.sig, "static", _index_tuple("static_argnums", static_argnums, int),
            _index_tuple("static_argnames", static_argnames, str))
        self.donate_nums, self.donate_names = _resolve_argnums(
            self.sig, "donate", _index_tuple("donate_argnums", donate_argnums, int),
            _index_tuple("donate_argnames", donate_argnames, str))
        both = self.static_names & self.donate_names
        if both or set(self.static_nums) & set(self.donate_nums):
            raise ValueError("static_argnames and donate_argnames cannot intersect. Argument "
                             f"names {set(both) or set(self.static_nums)} appear in both "
                             "static_argnums/static_argnames and donate_argnums/donate_argnames")
        self.has_options = bool(self.static_nums or self.static_names or self.donate_nums
                                or self.donate_names)
        self.lock = threading.Lock()
        self.cache: OrderedDict = OrderedDict()    # key -> _Once of _Traced, oldest use first
        # The hot path's tables, indexed by enable_x64: avals (one argument) or a tuple of
        # avals -> (exe.call, out_tree or None for a single output); and the last hit of each.
        self.fast: tuple[dict, dict] = ({}, {})
        self.last = [(None, None), (None, None)]
        # pytrees of Arrays (nested tuples/lists/dicts): structure-and-avals key -> same value
        self.fast_trees: tuple[dict, dict] = ({}, {})
        self.flat_trees: dict = {}   # (number of positional, keywords) -> treedef of leaves
        self.layouts: dict = {}      # number of positional arguments -> which are static
        self.num_traces = 0
        self.warned = False

    # -- splitting arguments --------------------------------------------------------------------
    def split(self, args, kwargs) -> _Call:
        c = _Call()
        c.args, c.kwargs, c.info = args, kwargs, self
        n = len(args)
        c.static_pos = {}
        if self.static_nums:
            for i in sorted({i + n if i < 0 else i for i in self.static_nums}):
                if 0 <= i < n:
                    c.static_pos[i] = args[i]
        c.static_kw = {k: v for k, v in kwargs.items() if k in self.static_names}
        c.static_key = ()
        if c.static_pos or c.static_kw:
            items = [(i, type(v), v) for i, v in c.static_pos.items()]
            items += [(k, type(c.static_kw[k]), c.static_kw[k]) for k in sorted(c.static_kw)]
            for name, _, v in items:
                try:
                    hash(v)
                except TypeError as e:
                    label = self.sig.arg_name(name) if isinstance(name, int) else name
                    raise _unhashable_error(label, v, e) from None
            c.static_key = tuple(items)
        dyn_pos = (tuple(a for i, a in enumerate(args) if i not in c.static_pos)
                   if c.static_pos else args)
        dyn_kw = {k: v for k, v in kwargs.items() if k not in c.static_kw} if kwargs else {}
        if all(type(a) in _LEAF_TYPES or isinstance(a, core.Tracer) for a in dyn_pos) and all(
                type(v) in _LEAF_TYPES or isinstance(v, core.Tracer) for v in dyn_kw.values()):
            # Every argument a leaf: the treedef depends only on the count and the keywords.
            keys = tuple(sorted(dyn_kw))
            tree = self.flat_trees.get((len(dyn_pos), keys))
            if tree is None:
                tree = tree_util.tree_structure(((0,) * len(dyn_pos), dict.fromkeys(keys, 0)))
                self.flat_trees[(len(dyn_pos), keys)] = tree
            c.leaves, c.in_tree = [*dyn_pos, *[dyn_kw[k] for k in keys]], tree
        else:
            c.leaves, c.in_tree = tree_util.tree_flatten((tuple(dyn_pos), dyn_kw))
        return c

    def donated_leaves(self, c: _Call) -> list[int]:
        """Flat indices of the leaves of donated arguments."""
        if not (self.donate_nums or self.donate_names):
            return []
        n = len(c.args)
        donated = {i + n if i < 0 else i for i in self.donate_nums}
        pos_tree, kw_tree = c.in_tree.children
        out, start = [], 0
        dyn_idx = [i for i in range(n) if i not in c.static_pos]
        for i, sub in zip(dyn_idx, pos_tree.children):
            if i in donated:
                out += range(start, start + sub.num_leaves)
            start += sub.num_leaves
        for key, sub in zip(kw_tree.node_data, kw_tree.children):
            if key in self.donate_names:
                out += range(start, start + sub.num_leaves)
            start += sub.num_leaves
        return out

    # -- tracing --------------------------------------------------------------------------------
    def trace(self, c: _Call, in_avals) -> _Traced:
        out_box = []
        in_tree, static_pos, static_kw, nargs = c.in_tree, c.static_pos, c.static_kw, len(c.args)

        def flat_fun(*tracers):
            dyn_pos, dyn_kw = tree_util.tree_unflatten(in_tree, tracers)
            it = iter(dyn_pos)
            full = [static_pos[i] if i in static_pos else next(it) for i in range(nargs)]
            out = self.fun(*full, **dyn_kw, **static_kw)
            leaves, tree = tree_util.tree_flatten(out)
            out_box.append(tree)
            return [self._output(x, tree, i) for i, x in enumerate(leaves)]

        closed = trace_to_jaxpr(flat_fun, list(in_avals))
        closed, hoisted = hoist_tracer_consts(simplify(closed))
        with self.lock:
            self.num_traces += 1
        return _Traced(closed, out_box[0], hoisted, c.leaf_paths())

    def _output(self, x, tree, i: int):
        """Output leaf ``i`` (of treedef ``tree``) as an Array or tracer; anything else is a
        TypeError naming its path."""
        if type(x) is Array or isinstance(x, core.Tracer):
            return x
        if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
            from fungrad.operands import operand
            return operand(x, f"jit({self.name}) output")
        path = tree_util._leaf_paths(tree, "output")[i]
        raise TypeError(f"jit({self.name}): the function returned a value of type "
                        f"{type(x).__name__} at {path} ({x!r:.40}), which is not an array; "
                        "return arrays, numpy values or Python scalars (or pytrees of them)")

    def lookup(self, c: _Call, avals: tuple) -> _Traced:
        """The traced jaxpr for this signature: from the cache, or traced now (once, however
        many threads ask at the same time)."""
        key = (c.in_tree, avals, c.static_key, self.backend, config.enable_x64)
        with self.lock:
            once = self.cache.get(key)
            new = once is None
            if new:
                previous = list(self.cache)
                once = self.cache[key] = _Once()
                self._bound_cache()
            else:
                self.cache.move_to_end(key)
        if new and previous:
            self._note_retrace(key, previous, c)
        try:
            traced = once.get(lambda: self.trace(c, avals))
        except BaseException:
            with self.lock:
                if self.cache.get(key) is once:
                    del self.cache[key]
            raise
        if traced.hoisted:
            # The function closes over tracers of an enclosing transform: the jaxpr belongs to
            # that transform's trace and must not be reused by later calls.
            with self.lock:
                if self.cache.get(key) is once:
                    del self.cache[key]
        return traced

    def _bound_cache(self):
        """Drop the least recently used signatures beyond ``config.jit_cache_max_entries``
        (called with the lock held, after a new one entered). Once the cache is full, the hot
        paths' tables are emptied at every new signature: they hold executables (an evicted one
        must not stay alive there) and their hits do not refresh the order, so each signature's
        next call goes through :meth:`lookup` once and is refreshed there."""
        cap = config.jit_cache_max_entries
        if cap <= 0 or len(self.cache) < cap:
            return
        while len(self.cache) > cap:
            self.cache.popitem(last=False)
        self._clear_hot_tables()

    def _clear_hot_tables(self):
        for table in (*self.fast, *self.fast_trees):
            table.clear()
        self.last[:] = [(None, None), (None, None)]

    # -- explaining retraces --------------------------------------------------------------------
    def _note_retrace(self, key, previous, c: _Call):
        threshold = config.jit_retrace_warning_threshold
        count = self.num_traces + 1
        warn = threshold > 0 and count > threshold and not self.warned
        if not (config.explain_recompiles or warn):
            return
        reason = self.explain(key, previous, c)
        where = f"jit({self.name}) (defined at {_fun_location(self.fun)})"
        if config.explain_recompiles:
            logger.warning("TRACING CACHE MISS: %s is traced again (trace %d) because %s",
                           where, count, reason)
        if warn:
            self.warned = True
            warnings.warn(
                f"{where} has been traced {count} times; each new trace compiles it again. The "
                f"last trace happened because {reason}. Keep argument shapes and dtypes stable "
                "(pad to a few sizes), make values that change on every call dynamic instead of "
                "static, and set config 'explain_recompiles' to see every retrace (config "
                "'jit_retrace_warning_threshold' changes this limit; 0 silences it). At most "
                f"{config.jit_cache_max_entries or 'unlimited'} signatures are kept per function "
                "(config 'jit_cache_max_entries'); beyond that the least recently used are "
                "dropped and traced again when called.",
                RetraceWarning, stacklevel=6)

    def explain(self, key, previous, c: _Call) -> str:
        """Why ``key`` missed the cache, against the most similar previous key."""
        best = None
        for old in reversed(previous):
            reasons = self._differences(old, key, c)
            if best is None or len(reasons) < len(best):
                best = reasons
        return "; ".join(best) if best else "the cache entry was dropped (clear_cache)"

    def _differences(self, old, new, c: _Call) -> list[str]:
        (o_tree, o_avals, o_static, o_backend, o_x64) = old
        (n_tree, n_avals, n_static, n_backend, n_x64) = new
        out = []
        if o_x64 != n_x64:
            out.append(f"config enable_x64 changed from {o_x64} to {n_x64}")
        if o_static != n_static:
            o_map = {k: v for k, _, v in o_static}
            n_map = {k: v for k, _, v in n_static}
            o_types = {k: t for k, t, _ in o_static}
            for k in sorted(set(o_map) | set(n_map), key=str):
                label = self.sig.arg_name(k) if isinstance(k, int) else k
                if k not in o_map:
                    out.append(f"static argument {label!r} is now passed ({n_map[k]!r:.60})")
                elif k not in n_map:
                    out.append(f"static argument {label!r} is no longer passed")
                elif o_types[k] is not type(n_map[k]) or not o_map[k] == n_map[k]:
                    out.append(f"static argument {label!r} changed from {o_map[k]!r:.60} to "
                               f"{n_map[k]!r:.60}")
        if o_tree != n_tree:
            out.extend(self._tree_differences(o_tree, n_tree, c))
        else:
            for path, a, b in zip(c.leaf_paths(), o_avals, n_avals):
                if a != b:
                    out.append(_aval_change(path, a, b))
        return out

    def _tree_differences(self, o_tree, n_tree, c: _Call) -> list[str]:
        (o_pos, o_kw), (n_pos, n_kw) = o_tree.children, n_tree.children
        out = []
        if len(o_pos.children) != len(n_pos.children):
            out.append(f"the number of dynamic positional arguments changed from "
                       f"{len(o_pos.children)} to {len(n_pos.children)}")
        else:
            for name, a, b in zip(c.dyn_names, o_pos.children, n_pos.children):
                if a != b:
                    out.append(f"the pytree structure of argument {name!r} changed from "
                               f"{tree_util.tree_unflatten(a, ['*'] * a.num_leaves)} to "
                               f"{tree_util.tree_unflatten(b, ['*'] * b.num_leaves)}")
        if o_kw.node_data != n_kw.node_data:
            out.append(f"the keyword arguments changed from {sorted(o_kw.node_data)} to "
                       f"{sorted(n_kw.node_data)}")
        else:
            for key, a, b in zip(n_kw.node_data, o_kw.children, n_kw.children):
                if a != b:
                    out.append(f"the pytree structure of argument {key!r} changed")
        return out or [f"the pytree structure of the arguments changed from {o_tree} to "
                       f"{n_tree}"]

    # -- calling --------------------------------------------------------------------------------
    def prepare(self, args, kwargs, abstract: bool = False):
        """Split, convert and look up a call: ``(call, leaves, avals, traced)``. With
        ``abstract`` (``lower``), ShapedArray leaves stand for arguments of that type."""
        c = self.split(args, kwargs)
        leaves = [x if type(x) in _HOT_TYPES
                  or (abstract and type(x) is core.ShapedArray) else
                  _as_operand(x, self, lambda i=i: c.leaf_paths()[i])
                  for i, x in enumerate(c.leaves)]
        avals = tuple(x if type(x) is core.ShapedArray else x.aval for x in leaves)
        return c, leaves, avals, self.lookup(c, avals)

    def call(self, args, kwargs):
        """The general path: any arguments, any trace."""
        if config.disable_jit:  # fungrad.disable_jit(): run the function as plain Python
            return self.fun(*args, **kwargs)
        c, leaves, avals, traced = self.prepare(args, kwargs)
        top = type(core.current_trace()) is EvalTrace and not traced.hoisted and not any(
            isinstance(x, core.Tracer) for x in leaves)
        if not top:
            outs = jit_p.bind(*traced.hoisted, *leaves, jaxpr=traced.jaxpr, name=self.name,
                              **_backend_param(self.backend))
            return tree_util.tree_unflatten(traced.out_tree, outs)
        exe = self.executable(traced)
        outs = exe.call(leaves)
        if config.debug_nans or config.debug_infs:
            self.check_outputs(args, kwargs, outs)
            return tree_util.tree_unflatten(traced.out_tree, outs)
        donated = self.donated_leaves(c)
        for i in donated:
            if type(c.leaves[i]) is Array:
                c.leaves[i].delete()
        if not kwargs:
            self.remember(c, exe, traced, avals)
            if not self.has_options:
                try:
                    key = tuple(_tree_key(a, []) for a in args)
                except TypeError:
                    key = None
                if key is not None:
                    tree = None if tree_util.treedef_is_leaf(traced.out_tree) else \
                        traced.out_tree
                    self.fast_trees[config.enable_x64][key] = (exe.call, tree)
        return tree_util.tree_unflatten(traced.out_tree, outs)

    def check_outputs(self, args, kwargs, outs):
        """debug_nans / debug_infs: when an output of the compiled function holds a NaN or an
        infinity, run the function again eagerly (as if not jitted), whose per-primitive
        checks name the primitive that made it; if that run stays clean (the compiled code
        and the eager one differ), say so."""
        try:
            core.check_nans_infs(f"jit({self.name})", [np.asarray(o) for o in outs])
        except FloatingPointError as compiled_error:
            saved = config.disable_jit
            config.disable_jit = True
            try:
                self.fun(*args, **kwargs)  # raises FloatingPointError at the primitive
            except FloatingPointError as eager_error:
                raise FloatingPointError(
                    f"{compiled_error} Running {self.name} again without jit to find where: "
                    f"{eager_error}") from None
            finally:
                config.disable_jit = saved
            raise FloatingPointError(
                f"{compiled_error} Running {self.name} again without jit, to find the "
                "primitive, produced no invalid value: the compiled code and the eager "
                "evaluation differ here (please report it).") from None

    def remember(self, c: _Call, exe, traced: _Traced, avals):
        """Enter a top-level call whose dynamic arguments are all Arrays (no pytrees, no
        keywords) in the hot path's table."""
        args, n = c.args, len(c.args)
        if len(c.leaves) != n - len(c.static_pos):  # some argument is a pytree
            return
        dyn_idx = tuple(i for i in range(n) if i not in c.static_pos)
        if not all(type(args[i]) in _HOT_TYPES for i in dyn_idx):
            return
        tree = None if tree_util.treedef_is_leaf(traced.out_tree) else traced.out_tree
        if not self.has_options:
            self.fast[config.enable_x64][avals[0] if n == 1 else avals] = (exe.call, tree)
            return
        layout = tuple(i in c.static_pos for i in range(n))
        dyn_avals = iter(avals)  # (the Arrays themselves may be donated, i.e. deleted, by now)
        key = (n, *[(type(a), a) if static else next(dyn_avals)
                    for a, static in zip(args, layout)])
        donated = {i + n if i < 0 else i for i in self.donate_nums}
        self.layouts[n] = layout
        self.fast[config.enable_x64][key] = (exe.call, tree, dyn_idx,
                                             tuple(sorted(i for i in donated if 0 <= i < n)))

    def executable(self, traced: _Traced):
        # Kept on the trace-cache entry, so it lives exactly as long as the jitted function.
        return traced.compiled.get(lambda: _compile(traced.jaxpr, self.backend, self.name))

    def clear_cache(self):
        with self.lock:
            self.cache.clear()
            self._clear_hot_tables()
            self.layouts.clear()

    def lower(self, args, kwargs) -> Lowered:
        c, leaves, avals, traced = self.prepare(args, kwargs, abstract=True)
        if traced.hoisted:
            raise TypeError(f"jit({self.name}).lower: the function closes over values traced by "
                            "an enclosing transform, so it cannot be compiled on its own; pass "
                            "them as arguments instead")
        return Lowered(self, traced, c.in_tree, avals, self.donated_leaves(c))


def _aval_change(path: str, a: core.ShapedArray, b: core.ShapedArray) -> str:
    if a.shape != b.shape:
        what = "shape and dtype" if a.dtype != b.dtype else "shape"
        return f"argument {path!r} changed {what} from {a.str_short()} to {b.str_short()}"
    if a.dtype != b.dtype:
        return f"argument {path!r} changed dtype from {a.str_short()} to {b.str_short()}"
    return (f"argument {path!r} ({b.str_short()}) changed from "
            f"{'weakly' if a.weak_type else 'strongly'} to "
            f"{'weakly' if b.weak_type else 'strongly'} typed (a Python scalar is weakly typed, "
            "an array strongly)")


# -- ahead-of-time: lower / compile ---------------------------------------------------------------

class Lowered:
    """``jit(f).lower(*args)``: ``f`` traced for one signature (``jax.stages.Lowered``).
    Arguments may be ShapedArrays (as JAX's ShapeDtypeStructs) instead of arrays.

    ``as_text()`` is the executable's text (optimised jaxpr, fusion plan, LLVM IR);
    ``compile()`` gives a :class:`Compiled`. ``jaxpr`` is the traced ClosedJaxpr.
    """

    def __init__(self, info: _JitFunction, traced: _Traced, in_tree, in_avals, donated):
        self._info = info
        self._traced = traced
        self.in_tree = in_tree
        self.in_avals = list(in_avals)
        self.out_avals = traced.jaxpr.out_avals
        self.out_tree = traced.out_tree
        self._donated = donated

    @property
    def jaxpr(self) -> core.ClosedJaxpr:
        return self._traced.jaxpr

    def as_text(self) -> str:
        return self._info.executable(self._traced).as_text()

    def compile(self) -> Compiled:
        return Compiled(self, self._info.executable(self._traced))


class Compiled:
    """A function compiled for one signature (``jax.stages.Compiled``).

    Called like the jitted function *without* its static arguments (as in JAX); arguments are
    checked against the compiled signature, and a mismatch is a TypeError naming the argument.
    """

    def __init__(self, lowered: Lowered, executable):
        self._lowered = lowered
        self._exe = executable
        self.in_tree = lowered.in_tree
        self.out_tree = lowered.out_tree
        self.in_avals = lowered.in_avals
        self.out_avals = lowered.out_avals

    def as_text(self) -> str:
        return self._exe.as_text()

    def __call__(self, *args, **kwargs):
        info = self._lowered._info
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"Compiled {info.name}: the function was compiled for arguments with "
                            f"pytree structure {self.in_tree} but is called with {tree} (static "
                            "arguments are not passed to a Compiled function)")
        paths = self._lowered._traced.paths
        arrays = [_as_operand(x, info, lambda p=p: p) for x, p in zip(leaves, paths)]
        if any(isinstance(x, core.Tracer) for x in arrays):
            raise TypeError(f"Compiled {info.name} cannot be called with traced values: a "
                            "function compiled ahead of time cannot be transformed; apply the "
                            "transform to the jitted function instead")
        mismatches = [f"Argument {p!r} compiled with {a.str_short()} and called with "
                      f"{x.aval.str_short()}"
                      for p, a, x in zip(paths, self.in_avals, arrays)
                      if a.strip_weak_type() != x.aval.strip_weak_type()]
        if mismatches:
            raise TypeError("Argument types differ from the types for which this computation "
                            f"was compiled (Compiled {info.name}). The mismatches are:\n"
                            + "\n".join(mismatches))
        outs = self._exe.call(arrays)
        for i in self._lowered._donated:
            if type(leaves[i]) is Array:
                leaves[i].delete()
        return tree_util.tree_unflatten(self.out_tree, outs)


# -- the public function --------------------------------------------------------------------------

_aval_of = Array._aval.__get__   # the cached aval of an Array; a TypeError for anything else
_HOT_TYPES = (Array, GpuArray)  # argument types the hot paths take (GPU results stay GpuArrays)


def _tree_key(x, leaves: list):
    """Structure-and-avals key of a pytree made only of Arrays, tuples, lists and dicts,
    appending its leaves in ``tree_flatten``'s order (dict keys sorted); a TypeError for
    anything else. Much cheaper than ``tree_flatten`` plus aval tuples on the hot path."""
    t = type(x)
    if t is Array or t is GpuArray:
        leaves.append(x)
        return _aval_of(x) or x.aval
    if t is tuple or t is list:
        return (t, *[_tree_key(e, leaves) for e in x])
    if t is dict:
        keys = sorted(x)
        return (dict, tuple(keys), *[_tree_key(x[k], leaves) for k in keys])
    raise TypeError
_trace_state = core._state


class _NotSpecified:
    """jit's ``fun`` when it is omitted (``jit(static_argnums=0)`` returns a decorator); an
    explicit None is an error, as in JAX."""

    def __repr__(self):
        return "NotSpecified"


_NOT_SPECIFIED = _NotSpecified()


def jit(fun=_NOT_SPECIFIED, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        donate_argnames=(), backend=None) -> Any:
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

    Returns:
      A function with the signature of ``fun`` (``functools.wraps``), plus ``lower(*args,
      **kwargs) -> Lowered``, ``clear_cache()`` and ``_cache_size()``.

    Example::

        @fg.jit
        def f(x):
            return fnp.tanh(x) * 2 + 1

        f(fnp.ones(3))                       # traced and compiled, then run natively
        fg.jit(f).lower(fnp.ones(3)).as_text()
    """
    if fun is _NOT_SPECIFIED:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums,
                                 donate_argnames=donate_argnames, backend=backend)
    check_callable(fun, "jit", "pass the function to compile: jit(f), or use @jit")
    info = _JitFunction(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                        _check_backend(backend))
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
                            (n, *[(type(a), a) if static else aval_of(a) or a.aval
                                  for a, static in zip(args, layout)]))
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
                    hit = trees[x64].get(tuple([_tree_key(a, leaves) for a in args]))
                except TypeError:
                    hit = None
                if hit is not None:
                    outs = hit[0](leaves)
                    tree = hit[1]
                    return outs[0] if tree is None else tree.unflatten(outs)
            return general(args, kwargs)

    def lower(*args, **kwargs) -> Lowered:
        """Trace (or find in the cache) the function for these arguments: a :class:`Lowered`,
        whose ``as_text()`` shows the compiled program and ``compile()`` gives it."""
        return info.lower(args, kwargs)

    functools.update_wrapper(jitted, fun)
    jitted.lower = lower
    jitted.clear_cache = info.clear_cache
    jitted._cache_size = lambda: len(info.cache)
    return jitted
