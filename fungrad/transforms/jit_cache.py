"""The state behind one ``jit(f)``: argument handling and the per-function trace cache.

:class:`JitFunction` splits each call's arguments into static values and dynamic leaves
(``static_argnums``/``static_argnames``, donation), keys its cache on the signature (pytree
structure, avals with weak types, static values, backend, ``enable_x64``), traces and compiles
a new signature once however many threads ask, and keeps at most
``config.jit_cache_max_entries`` signatures (least recently used dropped). It also fills the
tables the hot paths of fungrad/transforms/jit.py read, and explains retraces:
``config.explain_recompiles`` logs why a function was traced again (logger ``fungrad.jit``),
and a function traced more than ``config.jit_retrace_warning_threshold`` times gets one
:class:`RetraceWarning`.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from fungrad import core, dtypes, nan_hunt, tree_util
from fungrad.array import Array, is_concrete_array
from fungrad.config import config
from fungrad.core import EvalTrace
from fungrad.distributed import process_axis_key
from fungrad.ir.passes import COLLECTIVES, simplify, sub_jaxprs
from fungrad.lowering import profile as step_profile
from fungrad.operands import operand
from fungrad.transforms.api_util import (
    Signature,
    fun_location,
    fun_name,
    index_tuple,
    resolve_argnums,
)
from fungrad.transforms.compile_log import log_compile
from fungrad.transforms.jit_primitive import backend_param, compile_executable, jit_p
from fungrad.transforms.memo import Once, register_cache
from fungrad.transforms.staging import hoist_tracer_consts, trace_to_jaxpr

__all__ = [
    "BACKENDS",
    "CacheInfo",
    "JitFunction",
    "RetraceWarning",
    "Traced",
    "as_operand",
    "check_backend",
    "tree_key",
]

BACKENDS = ("cpu", "gpu")
"""The backends ``jit`` compiles for: native code through LLVM, WGSL through WebGPU."""

logger = logging.getLogger("fungrad.jit")


class CacheInfo(NamedTuple):
    """``jit(f).cache_info()``: the state of one jitted function's cache of traced signatures
    (named as ``functools.lru_cache``'s ``cache_info()``).

    ``hits``: calls that found their signature through the general path (pytree or keyword
    arguments, calls under a transform, ``lower``); calls served by the hot path (top level,
    Arrays only, a signature seen before) are not counted, so that path stays one dict lookup.
    ``misses``: signatures traced (each one is compiled once when first run).
    ``maxsize``: ``config.jit_cache_max_entries`` (0: unbounded). ``currsize``: signatures kept.
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int


class RetraceWarning(UserWarning):
    """A jitted function was traced (and compiled) again more often than
    ``config.jit_retrace_warning_threshold`` allows."""


# -- argument handling ----------------------------------------------------------------------------


def check_backend(backend) -> str:
    if backend is None or backend == "cpu":
        return "cpu"
    if backend == "gpu":
        return "gpu"
    raise ValueError(
        f"jit: backend {backend!r} is not available; the supported backends are "
        f"{', '.join(map(repr, BACKENDS))} (or None for the default, 'cpu')"
    )


def as_operand(x, info: JitFunction, path_of):
    """A dynamic argument leaf as an Array or tracer (canonical dtype, weak Python scalars);
    ``path_of()`` names the argument in the error for anything else."""
    if is_concrete_array(x) or isinstance(x, core.Tracer):  # GpuArrays stay on the GPU
        return x
    ok_numpy = isinstance(x, (np.ndarray, np.generic)) and dtypes.kind(x.dtype) in "biufc"
    if ok_numpy or (isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)):
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
        f"jit({info.name}, {hint})."
    )


_LEAF_TYPES = frozenset(
    {Array, float, int, bool, np.ndarray, np.float32, np.float64, np.int32, np.int64, np.bool_}
)
"""Types that are pytree leaves, so calls passing only these skip ``tree_flatten``."""


def _unhashable_error(name: str, value, err) -> ValueError:
    # NB: JAX raises ValueError here (not TypeError); its message is followed.
    return ValueError(
        f"Non-hashable static arguments are not supported. An error occurred while trying to "
        f"hash an object of type {type(value)}, {value!r:.80}, passed as static argument "
        f"{name}. The error was:\n{type(err).__name__}: {err}\nPass a hashable value (a tuple "
        "instead of a list, ...) or make the argument dynamic (an array)."
    )


# -- keys of pytrees of Arrays ------------------------------------------------------------------

_aval_of = Array._aval.__get__  # the cached aval of an Array; a TypeError for anything else


_registry = tree_util._registry  # node type -> its flatten/unflatten (tuple, list, None, ...)


def tree_key(x, leaves: list):
    """Structure-and-avals key of a pytree of Arrays (GpuArrays too), appending its leaves in
    ``tree_flatten``'s order; a TypeError for any other leaf. Much cheaper than ``tree_flatten``
    plus aval tuples on the hot path. Tuples, lists and dicts (keys sorted) are spelled out;
    namedtuples (optimizer states) key on their type, other registered nodes (None, user
    classes) on their type and aux data, as their treedef does (unhashable aux data makes the
    key unhashable: a TypeError where it is hashed, and the caller takes the general path)."""
    t = type(x)
    if t is Array:
        leaves.append(x)
        return _aval_of(x) or x.aval
    if t is tuple or t is list:
        return (t, *[tree_key(e, leaves) for e in x])
    if t is dict:
        keys = sorted(x)
        return (dict, tuple(keys), *[tree_key(x[k], leaves) for k in keys])
    if is_concrete_array(x):  # a GpuArray
        leaves.append(x)
        return _aval_of(x) or x.aval
    rec = _registry.get(t)
    if rec is not None:
        children, data = rec.flatten(x)
        return (t, data, *[tree_key(c, leaves) for c in children])
    if isinstance(x, tuple) and hasattr(t, "_fields"):  # a namedtuple
        return (t, *[tree_key(e, leaves) for e in x])
    raise TypeError


def _interned(key):
    """``key`` (a :func:`tree_key`) with every aval the interned object concrete Arrays and
    compiled outputs carry, so later lookups match it by identity (an Array made by an eager
    primitive carries its own ShapedArray: the optimizer state's first call)."""
    if type(key) is core.ShapedArray:
        return core.interned_aval(key.shape, key.dtype, key.weak_type)
    if type(key) is tuple:
        return tuple(_interned(k) for k in key)
    return key


# -- one jitted function --------------------------------------------------------------------------


class _Call:
    """One call's arguments split into static values and dynamic leaves."""

    __slots__ = (
        "args",
        "kwargs",
        "info",
        "static_pos",
        "static_kw",
        "static_key",
        "leaves",
        "in_tree",
    )

    @property
    def dyn_names(self) -> list[str]:
        """The names of the dynamic positional arguments."""
        return [
            self.info.sig.arg_name(i) for i in range(len(self.args)) if i not in self.static_pos
        ]

    def leaf_paths(self) -> list[str]:
        pos_tree, kw_tree = self.in_tree.children
        paths = []
        for name, sub in zip(self.dyn_names, pos_tree.children):
            paths += tree_util._leaf_paths(sub, name)
        for key, sub in zip(kw_tree.node_aux, kw_tree.children):
            paths += tree_util._leaf_paths(sub, key)
        return paths


class Traced:
    """A traced signature: the jaxpr, the output treedef, the executable (made on first use)."""

    __slots__ = ("jaxpr", "out_tree", "hoisted", "compiled", "profiled", "paths", "trace_time_s")

    def __init__(self, jaxpr, out_tree, hoisted, paths, trace_time_s=0.0):
        self.jaxpr = jaxpr
        self.out_tree = out_tree
        self.hoisted = hoisted  # tracers of enclosing transforms the function closes over
        self.compiled = Once()
        self.profiled = Once()  # the build fungrad.profile() runs (lowering/profile.py)
        self.paths = paths  # readable paths of the dynamic leaves
        self.trace_time_s = trace_time_s  # seconds spent tracing (and simplifying)


class JitFunction:
    """The state behind one ``jit(f)``: options, the trace cache and the fast-path tables."""

    def __init__(
        self, fun, static_argnums, static_argnames, donate_argnums, donate_argnames, backend
    ):
        self.fun = fun
        self.name = fun_name(fun)
        self.backend = backend
        self.sig = Signature(fun)
        self.static_nums, self.static_names = resolve_argnums(
            self.sig,
            "static",
            index_tuple("static_argnums", static_argnums, int),
            index_tuple("static_argnames", static_argnames, str),
        )
        self.donate_nums, self.donate_names = resolve_argnums(
            self.sig,
            "donate",
            index_tuple("donate_argnums", donate_argnums, int),
            index_tuple("donate_argnames", donate_argnames, str),
        )
        both = self.static_names & self.donate_names
        if both or set(self.static_nums) & set(self.donate_nums):
            raise ValueError(
                "static_argnames and donate_argnames cannot intersect. Argument "
                f"names {set(both) or set(self.static_nums)} appear in both "
                "static_argnums/static_argnames and donate_argnums/donate_argnames"
            )
        self.has_options = bool(
            self.static_nums or self.static_names or self.donate_nums or self.donate_names
        )
        self.lock = threading.Lock()
        self.cache: OrderedDict = OrderedDict()  # key -> _Once of Traced, oldest use first
        # The hot path's tables, indexed by enable_x64: avals (one argument) or a tuple of
        # avals -> (exe.call, out_tree or None for a single output); and the last hit of each.
        self.fast: tuple[dict, dict] = ({}, {})
        self.last = [(None, None), (None, None)]
        # pytrees of Arrays (nested tuples/lists/dicts): structure-and-avals key -> same value
        self.fast_trees: tuple[dict, dict] = ({}, {})
        self.flat_trees: dict = {}  # (number of positional, keywords) -> treedef of leaves
        self.layouts: dict = {}  # number of positional arguments -> which are static
        register_cache(self)  # (memo.clear_caches)
        self.num_traces = 0
        self.hits = 0  # signatures found by lookup (not counted on the hot paths)
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
        dyn_pos = (
            tuple(a for i, a in enumerate(args) if i not in c.static_pos) if c.static_pos else args
        )
        dyn_kw = {k: v for k, v in kwargs.items() if k not in c.static_kw} if kwargs else {}
        if all(type(a) in _LEAF_TYPES or isinstance(a, core.Tracer) for a in dyn_pos) and all(
            type(v) in _LEAF_TYPES or isinstance(v, core.Tracer) for v in dyn_kw.values()
        ):
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
        for key, sub in zip(kw_tree.node_aux, kw_tree.children):
            if key in self.donate_names:
                out += range(start, start + sub.num_leaves)
            start += sub.num_leaves
        return out

    # -- tracing --------------------------------------------------------------------------------
    def trace(self, c: _Call, in_avals) -> Traced:
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

        t0 = time.perf_counter()
        closed = trace_to_jaxpr(flat_fun, list(in_avals))
        closed, hoisted = hoist_tracer_consts(simplify(closed))
        elapsed = time.perf_counter() - t0
        with self.lock:
            self.num_traces += 1
        return Traced(closed, out_box[0], hoisted, c.leaf_paths(), elapsed)

    def _output(self, x, tree, i: int):
        """Output leaf ``i`` (of treedef ``tree``) as an Array or tracer; anything else is a
        TypeError naming its path."""
        if type(x) is Array or isinstance(x, core.Tracer):
            return x
        if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
            return operand(x, f"jit({self.name}) output")
        path = tree_util._leaf_paths(tree, "output")[i]
        raise TypeError(
            f"jit({self.name}): the function returned a value of type "
            f"{type(x).__name__} at {path} ({x!r:.40}), which is not an array; "
            "return arrays, numpy values or Python scalars (or pytrees of them)"
        )

    def lookup(self, c: _Call, avals: tuple) -> Traced:
        """The traced jaxpr for this signature: from the cache, or traced now (once, however
        many threads ask at the same time)."""
        # A multi-process pmap's process axes (fungrad.distributed) decide what the
        # collectives inside compile to: part of the key.
        key = (c.in_tree, avals, c.static_key, self.backend, config.enable_x64, process_axis_key())
        with self.lock:
            once = self.cache.get(key)
            new = once is None
            if new:
                previous = list(self.cache)
                once = self.cache[key] = Once()
                self._bound_cache()
            else:
                self.hits += 1
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
        where = f"jit({self.name}) (defined at {fun_location(self.fun)})"
        if config.explain_recompiles:
            logger.warning(
                "TRACING CACHE MISS: %s is traced again (trace %d) because %s", where, count, reason
            )
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
                RetraceWarning,
                stacklevel=6,
            )

    def explain(self, key, previous, c: _Call) -> str:
        """Why ``key`` missed the cache, against the most similar previous key."""
        best = None
        for old in reversed(previous):
            reasons = self._differences(old, key, c)
            if best is None or len(reasons) < len(best):
                best = reasons
        return "; ".join(best) if best else "the cache entry was dropped (clear_cache)"

    def _differences(self, old, new, c: _Call) -> list[str]:
        (o_tree, o_avals, o_static, o_backend, o_x64, o_axes) = old
        (n_tree, n_avals, n_static, n_backend, n_x64, n_axes) = new
        out = []
        if o_axes != n_axes:
            out.append(f"the process axes bound changed from {o_axes} to {n_axes}")
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
                    out.append(
                        f"static argument {label!r} changed from {o_map[k]!r:.60} to "
                        f"{n_map[k]!r:.60}"
                    )
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
            out.append(
                f"the number of dynamic positional arguments changed from "
                f"{len(o_pos.children)} to {len(n_pos.children)}"
            )
        else:
            for name, a, b in zip(c.dyn_names, o_pos.children, n_pos.children):
                if a != b:
                    out.append(
                        f"the pytree structure of argument {name!r} changed from "
                        f"{tree_util.tree_unflatten(a, ['*'] * a.num_leaves)} to "
                        f"{tree_util.tree_unflatten(b, ['*'] * b.num_leaves)}"
                    )
        if o_kw.node_aux != n_kw.node_aux:
            out.append(
                f"the keyword arguments changed from {sorted(o_kw.node_aux)} to "
                f"{sorted(n_kw.node_aux)}"
            )
        else:
            for key, a, b in zip(n_kw.node_aux, o_kw.children, n_kw.children):
                if a != b:
                    out.append(f"the pytree structure of argument {key!r} changed")
        return out or [f"the pytree structure of the arguments changed from {o_tree} to {n_tree}"]

    # -- calling --------------------------------------------------------------------------------
    def prepare(self, args, kwargs, abstract: bool = False):
        """Split, convert and look up a call: ``(call, leaves, avals, traced)``. With
        ``abstract`` (``lower``, ``trace``), ShapedArray and ShapeDtypeStruct leaves stand for
        arguments of that type."""
        c = self.split(args, kwargs)
        if abstract:
            from fungrad.shape_dtype_struct import ShapeDtypeStruct

            c.leaves = [x.aval if type(x) is ShapeDtypeStruct else x for x in c.leaves]
        leaves = [
            x
            if is_concrete_array(x) or (abstract and type(x) is core.ShapedArray)
            else as_operand(x, self, lambda i=i: c.leaf_paths()[i])
            for i, x in enumerate(c.leaves)
        ]
        avals = tuple(x if type(x) is core.ShapedArray else x.aval for x in leaves)
        return c, leaves, avals, self.lookup(c, avals)

    def call(self, args, kwargs):
        """The general path: any arguments, any trace."""
        if config.disable_jit:  # fungrad.disable_jit(): run the function as plain Python
            return self.fun(*args, **kwargs)
        c, leaves, avals, traced = self.prepare(args, kwargs)
        top = (
            type(core.current_trace()) is EvalTrace
            and not traced.hoisted
            and not any(isinstance(x, core.Tracer) for x in leaves)
        )
        if not top:
            outs = jit_p.bind(
                *traced.hoisted,
                *leaves,
                jaxpr=traced.jaxpr,
                name=self.name,
                **backend_param(self.backend),
            )
            return tree_util.tree_unflatten(traced.out_tree, outs)
        profiling = bool(step_profile.sinks)  # fungrad.profile(): the build that times its steps
        exe = self.profiled_executable(traced) if profiling else self.executable(traced)
        outs = exe.call(leaves)
        if config.debug_nans or config.debug_infs:
            self.check_outputs(traced, leaves, outs)
            return tree_util.tree_unflatten(traced.out_tree, outs)
        donated = self.donated_leaves(c)
        for i in donated:
            if type(c.leaves[i]) is Array:
                c.leaves[i].delete()
        if not kwargs and not profiling:
            tree = None if tree_util.treedef_is_leaf(traced.out_tree) else traced.out_tree
            hot = self.hot_call(exe, c, tree)
            self.remember(c, hot, tree, avals)
            if not self.has_options:
                try:
                    key = _interned(tuple(tree_key(a, []) for a in args))
                    hash(key)  # the aux data of a registered node may be unhashable
                except TypeError:
                    key = None
                if key is not None:
                    self.fast_trees[config.enable_x64][key] = (hot, tree)
        return tree_util.tree_unflatten(traced.out_tree, outs)

    def check_outputs(self, traced: Traced, leaves, outs):
        """debug_nans / debug_infs: one cheap screen of the outputs; only when one may hold a
        NaN or an infinity is the traced program run again op by op (eagerly, un-fused) to
        name the primitive that made it (see fungrad.nan_hunt). A program with collectives
        over process axes is not run again (:meth:`_communicating_error`)."""
        if not nan_hunt.may_hold_invalid(outs):
            return
        paths = tree_util._leaf_paths(traced.out_tree, "result")
        if process_axis_key() and _has_collective(traced.jaxpr.jaxpr):
            err = self._communicating_error(outs, paths)
            if err is not None:
                raise err
            return
        err = nan_hunt.jit_error(self.name, traced.jaxpr, leaves, outs, paths)
        if err is not None:
            raise err

    def hot_call(self, exe, c: _Call, tree):
        """What the hot paths' tables hold for a call ``c`` run by ``exe`` (output treedef
        ``tree``, None for one output): ``exe.call`` when no process axis is bound, else a
        guard that runs ``exe`` only under the same process axes.

        The tables' keys (avals, static values) hold no process axes, and a collective over a
        process axis compiles to MPI calls on that axis's communicator, so an executable made
        under one binding must not serve another. The guard costs one key comparison by
        identity (the keys are interned); under another binding it finds (traces and compiles
        once) the executable of that binding through :meth:`lookup` and keeps it beside the
        first. An executable made with no process axis bound needs no guard: its program has
        no collective over a process axis (tracing one would have failed), so it is the same
        under any binding."""
        axes = process_axis_key()
        if not axes:
            return exe.call
        first = exe.call
        calls = {axes: first}
        in_tree, static_pos, nargs = c.in_tree, dict(c.static_pos), len(c.args)

        def guarded(leaves):
            key = process_axis_key()
            if key is axes:
                return first(leaves)
            call = calls.get(key)
            if call is None:
                call = calls[key] = self.rebound_call(leaves, in_tree, static_pos, nargs, tree)
            return call(leaves)

        return guarded

    def rebound_call(self, leaves, in_tree, static_pos: dict, nargs: int, tree):
        """The ``exe.call`` of this function for the process axes bound now, for a hot-path
        entry made under other process axes: ``leaves`` (the dynamic leaves, flattened by
        ``in_tree``) and the entry's static values rebuild the call, which :meth:`lookup`
        traces or finds. A RuntimeError when the function returns another pytree structure
        under this binding (the hot path unflattens with the entry's)."""
        dyn_pos, dyn_kw = tree_util.tree_unflatten(in_tree, list(leaves))
        it = iter(dyn_pos)
        args = tuple(static_pos[i] if i in static_pos else next(it) for i in range(nargs))
        _, _, _, traced = self.prepare(args, dyn_kw)
        new_tree = None if tree_util.treedef_is_leaf(traced.out_tree) else traced.out_tree
        if traced.hoisted or new_tree != tree:
            raise RuntimeError(
                f"jit({self.name}): under the process axes {process_axis_key()} the function "
                f"returns {traced.out_tree}, but {tree or 'one array'} under the axes it was "
                "first called with; return the same pytree structure under every binding"
            )
        return self.executable(traced).call

    def _communicating_error(self, outs, paths) -> FloatingPointError | None:
        """debug_nans / debug_infs for a program with collectives over process axes: the
        FloatingPointError naming the invalid output, or None. No op-by-op rerun: its eager
        collectives communicate, and a rank rerunning alone (only its outputs are bad) would
        meet the other ranks' next collectives, a hang or a shape mismatch, not an answer."""
        found = nan_hunt._first_invalid(outs)
        if found is None:
            return None
        i, kind, bad = found
        value = np.asarray(outs[i])
        first = tuple(int(j) for j in np.argwhere(bad)[0])
        axes = [key[0] for key in process_axis_key()]
        return FloatingPointError(
            f"invalid value ({kind}) encountered in jit({self.name}): its output {i} "
            f"({paths[i]}), {core.ShapedArray(value.shape, value.dtype).str_short()}, holds "
            f"{int(bad.sum())} {kind} value(s), the first at index {first}. The program "
            f"communicates (collectives over the process axes {axes}), so it is not run again "
            "op by op to find the primitive (this rank alone would run its collectives); run "
            "the step under fungrad.disable_jit() on every rank to find it."
        )

    def remember(self, c: _Call, call, tree, avals):
        """Enter a top-level call whose dynamic arguments are all Arrays (no pytrees, no
        keywords) in the hot path's table: ``call`` (:meth:`hot_call`) runs it, ``tree`` is
        the output treedef (None for one output)."""
        args, n = c.args, len(c.args)
        if len(c.leaves) != n - len(c.static_pos):  # some argument is a pytree
            return
        dyn_idx = tuple(i for i in range(n) if i not in c.static_pos)
        if not all(is_concrete_array(args[i]) for i in dyn_idx):
            return
        if not self.has_options:
            self.fast[config.enable_x64][avals[0] if n == 1 else avals] = (call, tree)
            return
        layout = tuple(i in c.static_pos for i in range(n))
        dyn_avals = iter(avals)  # (the Arrays themselves may be donated, i.e. deleted, by now)
        key = (n, *[(type(a), a) if static else next(dyn_avals) for a, static in zip(args, layout)])
        donated = {i + n if i < 0 else i for i in self.donate_nums}
        self.layouts[n] = layout
        self.fast[config.enable_x64][key] = (
            call,
            tree,
            dyn_idx,
            tuple(sorted(i for i in donated if 0 <= i < n)),
        )

    def executable(self, traced: Traced):
        # Kept on the trace-cache entry, so it lives exactly as long as the jitted function.
        return traced.compiled.get(lambda: self._compile(traced))

    def profiled_executable(self, traced: Traced):
        """The build of ``traced`` that times each step, which calls use while a
        ``fungrad.profile()`` is open (made on first use, kept beside the ordinary one)."""
        return traced.profiled.get(lambda: self._compile(traced, profile=True))

    def _compile(self, traced: Traced, profile: bool = False):
        t0 = time.perf_counter()
        if profile:
            exe = compile_executable(traced.jaxpr, self.backend, self.name, profile=True)
        else:
            exe = compile_executable(traced.jaxpr, self.backend, self.name)
        if config.log_compiles:
            log_compile(
                f"jit({self.name})" + " (profiled)" * profile,
                self.name,
                traced.paths,
                traced.jaxpr.in_avals,
                self.backend,
                exe,
                time.perf_counter() - t0,
                traced.trace_time_s,
            )
        return exe

    def cache_info(self) -> CacheInfo:
        """Hits, misses, maximum and current size of this function's cache (:class:`CacheInfo`)."""
        with self.lock:
            return CacheInfo(
                self.hits, self.num_traces, config.jit_cache_max_entries, len(self.cache)
            )

    def clear_cache(self):
        with self.lock:
            self.cache.clear()
            self._clear_hot_tables()
            self.layouts.clear()


def _has_collective(jaxpr: core.Jaxpr) -> bool:
    """Whether ``jaxpr`` (or a sub-jaxpr of it) holds a collective (``ir.passes.COLLECTIVES``)."""
    return any(
        eqn.primitive.name in COLLECTIVES or any(map(_has_collective, sub_jaxprs(eqn)))
        for eqn in jaxpr.eqns
    )


def _aval_change(path: str, a: core.ShapedArray, b: core.ShapedArray) -> str:
    if a.shape != b.shape:
        what = "shape and dtype" if a.dtype != b.dtype else "shape"
        return f"argument {path!r} changed {what} from {a.str_short()} to {b.str_short()}"
    if a.dtype != b.dtype:
        return f"argument {path!r} changed dtype from {a.str_short()} to {b.str_short()}"
    return (
        f"argument {path!r} ({b.str_short()}) changed from "
        f"{'weakly' if a.weak_type else 'strongly'} to "
        f"{'weakly' if b.weak_type else 'strongly'} typed (a Python scalar is weakly typed, "
        "an array strongly)"
    )
