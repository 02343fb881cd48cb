"""How a step runs on the GPU: the analysis the choice needs and the choices as data.

Which kernels are scans (:func:`scan_of` -> :class:`ScanInfo`), which reductions can become
workgroup trees (:func:`top_reductions`, :class:`Tree`), how a scatter runs in parallel
(:class:`Scatter`), how a long matmul contraction splits (:class:`SplitK`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fungrad.lowering.fusion import Kernel, _walk
from fungrad.lowering.kernel import INDEX, Expr, Var


@dataclass(frozen=True)
class Scatter:
    """A scatter kernel (``parallel=False``: one store whose iterations may hit the same
    element) run with one invocation per iteration, exactly as the serial loop would.
    ``mode="combine"`` (scatter-add/mul/min/max): each invocation combines its update into
    the element atomically (WGSL has no float atomics: a compare-and-swap loop on the bits,
    or ``atomicAdd``/``Min``/``Max``/``Or``/``And`` where they compute the same thing).
    Overwriting scatters keep the serial loop's rule, the last update wins, in three
    dispatches: the arena words at ``base`` (one per element of the output) are zeroed
    (:func:`render_fill`), ``mode="claim"`` has each invocation ``atomicMax`` its iteration
    number + 1 into its element's word, and ``mode="write"`` lets only the winner store."""
    mode: str
    base: int = 0


# -- workgroup-tree reductions ---------------------------------------------------------------------

TREE_WG = 256  # invocations per workgroup of a tree reduction (WebGPU's default maximum)


@dataclass(frozen=True)
class Tree:
    """How a kernel's top-level reductions (those evaluated once per output element) run as
    workgroup trees, for kernels with few outputs and long reductions. ``groups == 1``: one
    dispatch, one workgroup per output element; its ``TREE_WG`` invocations fold a strided
    share of the elements each, then combine their values pairwise through workgroup memory
    (log2 steps), and invocation 0 does the stores. ``groups > 1``: a first pass
    (``partial``) of ``groups`` workgroups per output writes one partial result each (and
    its position, for argmax/argmin) to the arena at word ``base``; the second pass (the
    same kernel, ``partial=False``) folds the partials of its output the same way. The
    partials of the reductions of one kernel follow one another (``partial_words``)."""
    groups: int
    base: int
    partial: bool = False


def top_reductions(kern: Kernel) -> list[Expr]:
    """The reductions of ``kern`` evaluated once per output element (at no inner loop)."""
    loops = set(kern.loops)
    roots = [e for st in kern.stores for e in (st.value, st.index, st.mask) if e is not None]
    return [e for e in _walk(roots) if e.op == "reduce" and e.free <= loops]


def reductions_independent(tops: list[Expr]) -> bool:
    """No top-level reduction reads another (softmax's sum of exp(x - max) reads the max:
    such a kernel cannot split its reductions into two passes)."""
    ids = {id(e) for e in tops}
    return not any(id(x) in ids for e in tops for x in _walk([e.args[0]]))


def partial_words(kern: Kernel, groups: int) -> int:
    """Arena words the first pass of ``kern``'s tree reductions writes (value and, for
    argmax/argmin, position per output, group and reduction)."""
    outputs = math.prod(v.extent for v in kern.loops)
    return sum(outputs * groups * (2 if e.attr.op in ("argmax", "argmin") else 1)
               for e in top_reductions(kern))


@dataclass(frozen=True)
class SplitK:
    """A matmul whose contraction is split into ``chunks`` ranges of ``size`` (a multiple
    of ``KSTEP``), where one invocation could not loop through all of ``k`` on this
    adapter: the tiles of each range write partial products to the arena at word ``base``
    (``chunks * batch * m * n`` words, range-major), then :func:`render_gemm_sum` adds the
    ranges of each output in order and applies alpha and beta."""
    chunks: int
    size: int
    base: int


@dataclass(frozen=True)
class ScanInfo:
    """A serial kernel recognised as a scan along loop ``var`` (:func:`scan_of`): its one
    store writes ``combine(prev, elem)`` where ``prev`` loads the element the previous
    iteration stored (the first iteration's ``prev`` was stored by an earlier kernel)."""
    var: Var
    prev: Expr
    elem: Expr


def _affine(e: Expr) -> tuple[int, dict] | None:
    """(constant, {var: coefficient}) of an index expression built from constants, loop
    indices, + and -, and products by constants; None for any other expression."""
    if e.op == "const":
        return int(e.attr), {}
    if e.op == "idx":
        return 0, {e.attr: 1}
    if e.dtype != INDEX or e.op not in ("add", "sub", "mul"):
        return None
    a, b = _affine(e.args[0]), _affine(e.args[1])
    if a is None or b is None:
        return None
    if e.op == "mul":
        (scale, constant_terms), (const, terms) = (a, b) if not a[1] else (b, a)
        if constant_terms:  # a product of two loop-dependent factors
            return None
        return scale * const, {v: scale * x for v, x in terms.items()}
    sign = 1 if e.op == "add" else -1
    terms = dict(a[1])
    for v, x in b[1].items():
        terms[v] = terms.get(v, 0) + sign * x
    return a[0] + sign * b[0], {v: x for v, x in terms.items() if x}


def _injective(terms: dict, extents: dict) -> bool:
    """Does ``sum(terms[v] * v)`` take distinct values on the box ``0 <= v < extents[v]``?
    (Sufficient test: each coefficient exceeds the span of the smaller ones, as in a
    row-major layout.)"""
    span = 0
    for v in sorted((v for v in extents if extents[v] > 1), key=lambda v: abs(terms.get(v, 0))):
        coef = abs(terms.get(v, 0))
        if coef <= span:
            return False
        span += coef * (extents[v] - 1)
    return True


_ASSOCIATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor"})


def scan_of(kern: Kernel) -> ScanInfo | None:
    """``kern`` as a scan, or None. A scan is a kernel with one store ``buf[I] = value``
    (no mask or combine) whose value reads ``buf`` once, at ``J``, through a combine
    ``value = f(prev, elem)`` with ``prev = buf[J]``, ``elem`` free of ``buf`` and ``f``
    built of constants and ops only; ``I`` and ``J`` are affine with ``J(x + e_s) = I(x)``
    for a loop ``s`` (each iteration reads what the previous one along ``s`` stored) and
    ``I`` is one-to-one even with ``s`` extended to -1 (no store overwrites an element
    read later, nor a first element). ``f`` must be associative, as blocks combine in
    another order: an associative op of ``prev`` and ``elem``, or the cumulative
    logsumexp's combine. The cumulative reductions (lax/reduce.py) lower to such kernels."""
    if len(kern.stores) != 1:
        return None
    st, = kern.stores
    if st.combine is not None or st.mask is not None:
        return None
    loads = {id(e): e for e in _walk([st.value, st.index])
             if e.op == "load" and e.attr is st.buffer}
    if len(loads) != 1:
        return None
    prev, = loads.values()
    elem = None
    for cand in {id(e.args[1]): e.args[1] for e in _walk([st.value])
                 if len(e.args) == 2 and e.args[0] is prev and e.args[1].free}.values():
        if _closed(st.value, prev, cand):
            elem = cand
            break
    if elem is None or st.value.dtype != st.buffer.dtype or elem.dtype != st.buffer.dtype:
        return None
    root = st.value
    if not (root.op in _ASSOCIATIVE and {id(a) for a in root.args} == {id(prev), id(elem)}
            or kern.origins == ("cumlogsumexp",)):  # (reduce.py's logaddexp combine)
        return None  # e.g. x[i] = x[i - 1] - y[i]: blocks would combine in another order
    ai, aj = _affine(st.index), _affine(prev.args[0])
    if ai is None or aj is None or ai[1] != aj[1] or not set(ai[1]) <= set(kern.loops):
        return None
    extents = {v: v.extent for v in kern.loops}
    for s in kern.loops:
        coef = ai[1].get(s, 0)
        if coef and ai[0] == aj[0] + coef and _injective(ai[1], {**extents, s: s.extent + 1}):
            return ScanInfo(s, prev, elem)
    return None


def _closed(root: Expr, prev: Expr, elem: Expr) -> bool:
    """Is ``root`` a function of ``prev`` and ``elem`` alone (constants aside), with
    ``elem`` not reading ``prev``?"""
    if any(e is prev for e in _walk([elem])):
        return False
    seen, stack = set(), [root]
    while stack:
        e = stack.pop()
        if e is prev or e is elem or id(e) in seen:
            continue
        seen.add(id(e))
        if e.op in ("idx", "load", "reduce"):
            return False
        stack.extend(e.args)
    return True
