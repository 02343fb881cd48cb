"""Kernel ops: the small closed set of scalar operations both renderers know.

A compiled program computes arrays element by element. Every value the lowering manipulates is
a *scalar expression* (:class:`Expr`) over loop indices: ``x[i, j] * 2`` is
``mul(load(x, i*n + j), 2)``. Primitives never reach the renderers. Each primitive's *lowering
rule* (beside the primitive, in its ``fungrad/lax`` family module, registered in
:data:`lowering_rules`) maps lazy input :class:`Tensor` s to lazy output tensors, i.e. it says
how to compute one output element from input elements:

* elementwise primitives map one kernel op over their operands (:func:`map_op`);
* reshape / transpose / broadcast / slice / pad / concatenate / gather are index arithmetic
  (:func:`from_fn`): nothing is copied, the consumer just reads the producer at other indices;
* reductions introduce bound loop variables (:meth:`Ctx.reduce`);
* operations that cannot be expressed per element (matmul through BLAS, sort, scatter, loops)
  ask for their inputs in memory (:meth:`Ctx.materialize`) and append a *step* to the program.

Because a tensor is a function from indices to an expression, composing rules *is* fusion:
``tanh(x) * 0.5 + exp(-x)`` becomes one expression tree evaluated in one loop. The planner
(``fusion.py``) decides which tensors are stored to memory; the renderer places each node of
the tree at the outermost loop where its indices are defined (so a row maximum is computed once
per row, not once per element).

Expressions are interned per compilation (:class:`Ctx`), so equal subtrees are one node: common
subexpressions are computed once in a kernel.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

INDEX = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)

# -- the kernel-op set ---------------------------------------------------------------------------

#: float-only unary ops implemented by ``llvm_math`` polynomials (and by WGSL builtins)
MATH_UNARY = frozenset(
    {
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "tan",
        "atan",
        "asin",
        "acos",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "erfc",
        "cbrt",
        "lgamma",
        "digamma",
        "erf_inv",
    }
)
UNARY = (
    frozenset(
        {
            "neg",
            "abs",
            "sign",
            "floor",
            "ceil",
            "round_even",
            "round_away",
            "sqrt",
            "rsqrt",
            "not",
            "popcnt",
            "clz",
            "is_finite",
            "isnan",
        }
    )
    | MATH_UNARY
)
BINARY = frozenset(
    {
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "max",
        "min",
        "pow",
        "atan2",
        "and",
        "or",
        "xor",
        "shl",
        "shr_logical",
        "shr_arith",
        "nextafter",
    }
)
COMPARE = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
REDUCE_OPS = frozenset({"add", "mul", "max", "min", "and", "or", "xor", "argmax", "argmin"})
#: all ops an Expr may carry
OPS = (
    UNARY
    | BINARY
    | COMPARE
    | frozenset({"const", "idx", "load", "select", "convert", "bitcast", "reduce", "idiv", "irem"})
)


class Var:
    """A loop variable: ``0 <= var < extent``. Kernel loops and reduction loops bind them
    (``bound``: a reduction's, made by :meth:`Ctx.reduce`)."""

    __slots__ = ("id", "extent", "bound")
    _ids = itertools.count()

    def __init__(self, extent: int, bound: bool = False):
        self.id = next(Var._ids)
        self.extent = int(extent)
        self.bound = bound

    def __repr__(self):
        return f"v{self.id}<{self.extent}>"


class Buffer:
    """A named array in memory: a program input, output, constant or temporary."""

    __slots__ = ("id", "shape", "dtype", "kind", "name", "ready", "ctx", "index", "alias")

    def __init__(
        self, id: int, shape: tuple[int, ...], dtype: np.dtype, kind: str, name: str, ctx=None
    ):
        self.id, self.shape, self.dtype, self.kind, self.name = id, shape, dtype, kind, name
        self.ready = kind in ("input", "const")  # holds its value before the current step
        self.ctx = ctx
        self.index = 0  # position among the inputs/outputs/consts, or offset of a temporary
        # a temporary written over this one's memory by the kernel that reads it last
        # (peephole.kernels_in_place): the same offset, and one pointer in that kernel
        self.alias: Buffer | None = None

    size = property(lambda self: math.prod(self.shape))

    def root(self) -> Buffer:
        """The buffer whose memory this one is (itself unless an alias, see ``alias``)."""
        b = self
        while b.alias is not None:
            b = b.alias
        return b

    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __repr__(self):
        return f"{self.name}:{self.dtype.name}{list(self.shape)}"


class Expr:
    """One interned node of a scalar expression. Build nodes through a :class:`Ctx`.

    ``free`` is the set of loop variables the value depends on (a reduction's own variables are
    bound inside it, so not free). ``dtype`` is the element dtype (``INDEX`` for index math).
    """

    __slots__ = ("op", "args", "dtype", "attr", "free", "__weakref__")

    def __init__(self, op, args, dtype, attr, free):
        self.op, self.args, self.dtype, self.attr, self.free = op, args, dtype, attr, free

    def __repr__(self):
        if self.op == "const":
            return repr(self.attr)
        if self.op == "idx":
            return repr(self.attr)
        return f"{self.op}({', '.join(map(repr, self.args))})"

    @property
    def is_const(self) -> bool:
        return self.op == "const"


class Reduction:
    """``attr`` of a ``reduce`` node: the monoid and the variables it binds (outermost first)."""

    __slots__ = ("op", "vars")

    def __init__(self, op: str, vars: tuple[Var, ...]):
        self.op, self.vars = op, vars

    def __repr__(self):
        return f"{self.op}{list(self.vars)}"


_building: list = []  # (tensor, index) whose element is being built, innermost last; compiles
#                       are serial
_reduces: list = []  # beside each _building entry: how many reductions its build has begun
_generation = [0]  # bumped by the planner before each kernel is built: element memos are per build
#: while the planner builds a kernel: ``hook(tensor, index)``, called for every element read of
#: a tensor not yet in memory (memoised or not); it may raise :class:`StoreFirst`
_on_read: list = [None]


def new_generation() -> None:
    """Forget every tensor's memoised elements (lazily, on its next :meth:`Tensor.at`). The
    planner calls it before building a kernel when buffers were stored since the last call:
    an element memoised earlier (a 0-d tensor's, at the same ``()`` index in every kernel)
    may compute a reduction that is now stored, and would compute it again."""
    _generation[0] += 1


class StoreFirst(Exception):  # noqa: N818 -- a request to the planner, not an error
    """Raised while a kernel is built when a tensor the planner may still store is asked for
    at another index and recomputing it there costs too much: a reduction at a second index
    (:attr:`Ctx.on_reduce`), where each index would be a copy of the reduction's loop and body
    and copies inside copies grow exponentially (the gradient of an unrolled 3x3 solve built
    200000 nodes); any other tensor whose element, recomputed at each index it is read at,
    passes a bound (:data:`_on_read`; the derivative of a cumulative product reads each level
    of a log-depth chain at ``i`` and ``i - 2**k``, doubling the expression per level). The
    planner stores it first and builds again."""

    def __init__(self, tensor):
        super().__init__(tensor)
        self.tensor = tensor


#: The most elements one build may nest (a tensor's element built inside its reader's): a
#: deeper element is built first from the driver's stack (:class:`_Deep`), so a chain of
#: thousands of lazy tensors never nests thousands of Python frames. A level takes 3 to ~10
#: frames; 48 levels stay far from the interpreter's default limit of 1000.
MAX_NESTING = 48


class _Deep(Exception):  # noqa: N818 -- control flow inside the builder, never escapes it
    """Raised by :meth:`Tensor.at` instead of building an element :data:`MAX_NESTING` builds
    deep; the driver (:func:`_drive`) builds that element first, then builds again."""

    def __init__(self, tensor, idx):
        super().__init__()
        self.tensor, self.idx = tensor, idx


class _Drive:
    """The running driver's state: the ``_building`` depth it builds at and the bound
    variables of reductions begun by builds it abandoned (a rebuilt element gets the same
    variables, so the elements read inside its reduction are the ones already built)."""

    __slots__ = ("base", "reduce_vars")

    def __init__(self, base: int):
        self.base = base
        self.reduce_vars: dict = {}


_drive_state: list = [None]  # the running _Drive, or None


def _drive(t, idx: tuple, keep: bool) -> Expr:
    """``t``'s element at ``idx`` built by its rule (memoised where ``keep``) without nesting
    more than :data:`MAX_NESTING` element builds: an element deeper than that aborts the builds
    above it (:class:`_Deep`), is built first (memoised), and the aborted work starts again,
    meeting it in the memo. Elements still deeper are found the same way, so the work is an
    explicit stack of elements to build; each is built about twice, at a bounded Python
    depth."""
    state = _drive_state[0] = _Drive(len(_building))
    todo: list = []  # (tensor, index) to build before the builds below it on the list
    try:
        while True:
            try:
                if not todo:
                    _building.append((t, idx))
                    _reduces.append(0)
                    try:
                        e = t.fn(idx)
                    finally:
                        _building.pop()
                        _reduces.pop()
                    if keep:
                        t.memo[idx] = e
                    return e
                u, uidx = todo[-1]
                u.at(uidx)
                todo.pop()
            except _Deep as deep:
                if len(_building) != state.base:  # (the builds above were all abandoned)
                    raise
                todo.append((deep.tensor, deep.idx))
    finally:
        _drive_state[0] = None


def build_element(t, idx: tuple) -> Expr:
    """The element of ``t`` at ``idx`` computed by its rule (not read from its buffer, not
    memoised): how the planner builds what a kernel stores."""
    if _drive_state[0] is None:
        return _drive(t, idx, False)
    _building.append((t, idx))
    _reduces.append(0)
    try:
        return t.fn(idx)
    finally:
        _building.pop()
        _reduces.pop()


class Tensor:
    """A lazy array: ``shape``, ``dtype`` and a rule ``fn(index_exprs) -> Expr`` giving one
    element. ``at`` memoises per index tuple (indices are interned nodes), so asking twice for
    the same element yields the same node."""

    __slots__ = ("shape", "dtype", "fn", "memo", "buffer", "origin", "view", "gen")

    def __init__(self, shape, dtype, fn: Callable[[tuple[Expr, ...]], Expr], origin: str = ""):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.fn = fn
        self.memo: dict = {}  # index -> element, for the kernel build of generation ``gen``
        self.gen = _generation[0]
        self.buffer: Buffer | None = None  # set when the planner stores this tensor
        self.origin = origin
        # (buffer, perm) when the tensor is a buffer's data read through a dimension permutation
        # (a transpose or reshape of a stored array): contractions then use it in place.
        self.view: tuple[Buffer, tuple[int, ...]] | None = None

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def at(self, idx: Sequence[Expr]) -> Expr:
        idx = tuple(idx)
        buf = self.buffer
        if buf is not None and buf.ready:  # stored by an earlier step: read it back
            return buf.ctx.load(buf, buf.ctx.flat_index(idx, self.shape))
        if len(idx) != len(self.shape):
            raise ValueError(
                f"lowering: {self.origin or 'tensor'} of shape {self.shape} indexed "
                f"with {len(idx)} indices"
            )
        hook = _on_read[0]
        if hook is not None:
            hook(self, idx)
        if self.gen != _generation[0]:
            self.memo, self.gen = {}, _generation[0]
        e = self.memo.get(idx)
        if e is None:
            state = _drive_state[0]
            if state is None:
                e = _drive(self, idx, True)
            else:
                if len(_building) - state.base >= MAX_NESTING:
                    raise _Deep(self, idx)
                _building.append((self, idx))
                _reduces.append(0)
                try:
                    e = self.memo[idx] = self.fn(idx)
                finally:
                    _building.pop()
                    _reduces.pop()
            if e.dtype != self.dtype:
                raise TypeError(
                    f"lowering rule of {self.origin}: element dtype {e.dtype} but "
                    f"the tensor is {self.dtype}"
                )
        return e

    def __repr__(self):
        where = f" in {self.buffer.name}" if self.buffer is not None else ""
        return f"Tensor({self.origin}: {self.dtype.name}{list(self.shape)}{where})"


# -- the per-compilation context: interning and expression builders -----------------------------


def _free_of(op, args, attr) -> frozenset:
    if op == "idx":
        return frozenset((attr,))
    free = frozenset().union(*(a.free for a in args)) if args else frozenset()
    if op == "reduce":
        free = free - frozenset(attr.vars)
    return free


def _convert_value(value, from_dtype, to_dtype):
    """A constant converted as the kernel op ``convert`` does at run time: float -> int
    truncates toward zero, saturates and maps NaN to 0 (numpy's cast gives INT_MIN)."""
    if from_dtype.kind == "f" and to_dtype.kind in "iu":
        info = np.iinfo(to_dtype)
        if math.isnan(value):
            return 0
        return (
            int(min(max(math.trunc(value), info.min), info.max))
            if math.isfinite(value)
            else (info.max if value > 0 else info.min)
        )
    with np.errstate(all="ignore"):
        return np.asarray(value, from_dtype).astype(to_dtype)[()]


#: float ops :meth:`Ctx.op` computes at build time when every operand is a constant
_FOLDED = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "floor": np.floor,
    "ceil": np.ceil,
    "round_even": np.rint,
}


class Ctx:
    """Builds interned expression nodes, and records what the planner must know: tensors that
    must live in memory and the program's steps. Lowering rules receive one as ``ctx``."""

    def __init__(self, planner=None):
        self._nodes: dict = {}
        self.planner = planner
        self.reduce_origin: dict[Expr, Tensor] = {}  # reduce node -> the tensor it computes
        # (shape, ids of unflatten(flat, shape)'s nodes) -> flat: flat_index undoes unflatten
        self._unflattened: dict[tuple, Expr] = {}
        self._index_max: dict[int, int | None] = {}  # id(index node) -> its largest value
        # while the planner builds a kernel: called with (tensor, index) before a reduction of
        # that tensor's element at that index is built; may raise StoreFirst
        self.on_reduce: Callable | None = None

    # nodes
    def node(self, op: str, args: tuple, dtype, attr=None) -> Expr:
        dtype = np.dtype(dtype)
        key = (
            op,
            tuple(id(a) for a in args),
            dtype,
            attr if op != "const" else (attr, np.asarray(attr).tobytes()),
        )
        e = self._nodes.get(key)
        if e is None:
            # interned nodes live as long as the context, so argument ids stay unique
            e = self._nodes[key] = Expr(op, tuple(args), dtype, attr, _free_of(op, args, attr))
        return e

    def const(self, value, dtype) -> Expr:
        dtype = np.dtype(dtype)
        return self.node(
            "const",
            (),
            dtype,
            dtype.type(value).item() if dtype.kind != "f" else float(dtype.type(value)),
        )

    def index(self, var: Var) -> Expr:
        return self.node("idx", (), INDEX, var)

    def load(self, buffer: Buffer, flat_index: Expr) -> Expr:
        return self.node("load", (flat_index,), buffer.dtype, buffer)

    # index arithmetic (int64), folded where trivial so kernels stay simple
    def iadd(self, a: Expr, b: Expr) -> Expr:
        if a.is_const and b.is_const:
            return self.const(a.attr + b.attr, INDEX)
        if a.is_const and a.attr == 0:
            return b
        if b.is_const and b.attr == 0:
            return a
        return self.node("add", (a, b), INDEX)

    def isub(self, a: Expr, b: Expr) -> Expr:
        if b.is_const:
            return self.iadd(a, self.const(-b.attr, INDEX))
        if a is b:
            return self.const(0, INDEX)
        return self.node("sub", (a, b), INDEX)

    def imul(self, a: Expr, b: Expr) -> Expr:
        if a.is_const and b.is_const:
            return self.const(a.attr * b.attr, INDEX)
        for x, y in ((a, b), (b, a)):
            if x.is_const and x.attr == 1:
                return y
            if x.is_const and x.attr == 0:
                return x
        return self.node("mul", (a, b), INDEX)

    def idiv(self, a: Expr, b: Expr) -> Expr:
        """Floor division of non-negative index values. By a constant ``c``: 0 when ``a`` stays
        below ``c``, and ``(q * c * m + r) // c`` is ``q * m + r // c`` (:meth:`_multiple_of`),
        so a flat index split back into a row and a column costs no division where the row
        is a loop variable (64-bit divisions by constants do not vectorise)."""
        if a.is_const and b.is_const:
            return self.const(a.attr // b.attr, INDEX)
        if b.is_const and b.attr == 1:
            return a
        if b.is_const and b.attr > 1:
            top = self._max(a)
            if top is not None and top < b.attr:
                return self.iconst(0)
            split = self._multiple_of(a, b.attr)
            if split is not None:
                return self.iadd(split[0], self.idiv(split[1], b))
        return self.node("idiv", (a, b), INDEX)

    def irem(self, a: Expr, b: Expr) -> Expr:
        """Remainder of non-negative index values: ``a`` itself below a constant ``c``, and
        ``(q * c * m + r) % c`` is ``r % c``."""
        if a.is_const and b.is_const:
            return self.const(a.attr % b.attr, INDEX)
        if b.is_const and b.attr == 1:
            return self.const(0, INDEX)
        if b.is_const and b.attr > 1:
            top = self._max(a)
            if top is not None and top < b.attr:
                return a
            split = self._multiple_of(a, b.attr)
            if split is not None:
                return self.irem(split[1], b)
        return self.node("irem", (a, b), INDEX)

    def _multiple_of(self, a: Expr, c: int) -> tuple[Expr, Expr] | None:
        """``(q, r)`` with ``a == q * c + r`` and ``q``, ``r`` non-negative, where ``a`` is a sum
        of products of non-negative index values and positive constants (:meth:`_terms`) and
        ``c`` divides some of those constants; else None. The sum may be nested: a flat index
        ``((i * 128 + j) * 256 + k) // 32768`` is ``i`` for ``j < 128``, ``k < 256`` (the
        transformer's head transposes divided by 32768 per element before)."""
        terms = self._terms(a)
        if terms is None or not any(k % c == 0 for _, k in terms):
            return None
        q = self._sum([(x, k // c) for x, k in terms if k % c == 0])
        return q, self._sum([(x, k) for x, k in terms if k % c])

    def _terms(self, e: Expr) -> list[tuple[Expr, int]] | None:
        """``e`` as a sum of ``(x, k)``: ``x * k`` for a positive constant ``k`` and an index
        value ``x`` whose bounds :meth:`_max` knows (or ``x`` the constant 1); None where
        ``e`` is not such a sum."""
        if e.is_const:
            v = e.attr
            return None if not isinstance(v, int) or v < 0 else [(self.iconst(1), v)] if v else []
        if e.op == "add":
            a, b = self._terms(e.args[0]), self._terms(e.args[1])
            return None if a is None or b is None else a + b
        if e.op == "mul":
            for x, k in (e.args, e.args[::-1]):
                if k.is_const and isinstance(k.attr, int) and k.attr > 0:
                    t = self._terms(x)
                    return None if t is None else [(y, m * k.attr) for y, m in t]
        return [(e, 1)] if self._max(e) is not None else None

    def _sum(self, terms: list[tuple[Expr, int]]) -> Expr:
        out = self.iconst(0)
        for x, k in terms:
            out = self.iadd(out, self.imul(x, self.iconst(k)))
        return out

    def iconst(self, v: int) -> Expr:
        return self.const(int(v), INDEX)

    def flat_index(self, idx: Sequence[Expr], shape: Sequence[int]) -> Expr:
        """Row-major offset of ``idx`` in an array of ``shape``. Where ``idx`` is
        ``unflatten(f, shape)`` of an ``f`` known to lie inside the array, ``f`` itself: a
        reshape of a stored array read back (a CNN's flattened activations' gradient read as
        ``[64, 7, 7, 32]`` from ``[64, 1568]``) computed ``(f // 1568 % 64) * 1568 + f % 1568``
        per element, 64-bit divisions the vectoriser cannot widen (the pool backward reading
        it ran at 8 ns an element, its twin without the reshape at 0.8)."""
        f = self._unflattened.get((tuple(shape), tuple(map(id, idx))))
        if f is not None:
            top = self._max(f)
            if top is not None and top < math.prod(shape):
                return f
        flat = self.iconst(0)
        for i, n in zip(idx, shape):
            flat = self.iadd(self.imul(flat, self.iconst(n)), i)
        return flat

    def unflatten(self, flat: Expr, shape: Sequence[int]) -> tuple[Expr, ...]:
        """The inverse of :meth:`flat_index` (div/mod by the trailing sizes). An array with
        no elements has no valid index, and no loop ever evaluates one: zeros then."""
        if 0 in shape:
            return tuple(self.iconst(0) for _ in shape)
        out = []
        stride = math.prod(shape)
        for n in shape:
            stride //= n
            out.append(
                self.irem(self.idiv(flat, self.iconst(stride)), self.iconst(n))
                if n != 1
                else self.iconst(0)
            )
        out = tuple(out)
        self._unflattened[(tuple(shape), tuple(map(id, out)))] = flat
        return out

    def _max(self, e: Expr) -> int | None:
        """The largest value index expression ``e`` takes (loop variables over their extents),
        or None where that is not known here."""
        got = self._index_max.get(id(e), -1)
        if got != -1:
            return got
        a = [self._max(x) for x in e.args] if e.op in ("add", "mul", "idiv", "irem") else []
        if e.op == "const":
            top = e.attr if isinstance(e.attr, int) and e.attr >= 0 else None
        elif e.op == "idx":
            top = e.attr.extent - 1
        elif None in a or len(a) != 2:
            top = None
        elif e.op == "add":
            top = a[0] + a[1]
        elif e.op == "mul":
            top = a[0] * a[1]
        elif e.op == "idiv":
            top = a[0] // e.args[1].attr if e.args[1].is_const and e.args[1].attr > 0 else None
        else:  # irem by a positive constant
            top = min(a[0], e.args[1].attr - 1) if e.args[1].is_const else None
        self._index_max[id(e)] = top
        return top

    # scalar ops
    def op(self, name: str, *args: Expr, dtype=None) -> Expr:
        """Apply kernel op ``name``; the result dtype is the first operand's unless ``dtype``
        is given (comparisons give bool)."""
        if name not in OPS:
            raise ValueError(f"unknown kernel op {name!r}")
        if dtype is None:
            dtype = (
                BOOL if name in COMPARE or name == "isnan" or name == "is_finite" else args[0].dtype
            )
        if name in _FOLDED and all(a.is_const for a in args) and np.dtype(dtype).kind == "f":
            return self._fold(name, args, dtype)
        return self.node(name, tuple(args), dtype)

    def _fold(self, name: str, args: tuple[Expr, ...], dtype) -> Expr:
        """Correctly rounded IEEE arithmetic on constants, computed once here (numpy rounds
        as both backends do) instead of by each backend: a mean over an empty axis is
        ``0.0 / 0.0``, which WGSL's shader compiler evaluated itself and rejected as a NaN.
        Run-time ``convert`` semantics then apply to the result (:func:`_convert_value`)."""
        x = [np.asarray(a.attr, a.dtype) for a in args]
        with np.errstate(all="ignore"):
            return self.const(_FOLDED[name](*x), dtype)

    def select(self, pred: Expr, on_true: Expr, on_false: Expr) -> Expr:
        if pred.is_const:
            return on_true if pred.attr else on_false
        if on_true is on_false:
            return on_true
        return self.node("select", (pred, on_true, on_false), on_true.dtype)

    def convert(self, x: Expr, dtype) -> Expr:
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        if x.is_const:
            return self.const(_convert_value(x.attr, x.dtype, dtype), dtype)
        return self.node("convert", (x,), dtype)

    def bitcast(self, x: Expr, dtype) -> Expr:
        dtype = np.dtype(dtype)
        if x.dtype == dtype:
            return x
        return self.node("bitcast", (x,), dtype)

    def reduce(
        self, op: str, extents: Sequence[int], body: Callable[..., Expr], dtype=None
    ) -> Expr:
        """``op``-reduce ``body(*index_exprs)`` over fresh loop variables with ``extents``.

        ``argmax``/``argmin`` give the (first) position of the extreme value (NaN counts as
        the extreme, as in JAX) as a flat int64 index over ``extents``; ``dtype`` converts it.
        """
        if op not in REDUCE_OPS:
            raise ValueError(f"unknown reduction {op!r}")
        if _building and self.on_reduce is not None:
            self.on_reduce(*_building[-1])
        vars_ = None
        state = _drive_state[0]
        if _building and state is not None:  # a rebuild after _Deep: the same variables
            key = (*_building[-1], _reduces[-1])
            _reduces[-1] += 1
            vars_ = state.reduce_vars.get(key)
        if vars_ is None:
            vars_ = tuple(Var(n, bound=True) for n in extents)
            if _building and state is not None:
                state.reduce_vars[key] = vars_
        value = body(*[self.index(v) for v in vars_])
        out_dtype = INDEX if op in ("argmax", "argmin") else value.dtype
        e = self.node("reduce", (value,), out_dtype, Reduction(op, vars_))
        if _building:
            self.reduce_origin.setdefault(e, _building[-1][0])
        if dtype is not None:
            e = self.convert(e, dtype)
        return e

    # tensors
    def materialize(self, t: Tensor) -> Tensor:
        """``t`` stored in memory: a tensor that loads from the buffer the planner gives it."""
        return self.planner.materialize(t)


# -- building tensors -----------------------------------------------------------------------------


def from_fn(shape, dtype, fn, origin="") -> Tensor:
    """A tensor whose element at ``idx`` is ``fn(idx)``."""
    return Tensor(shape, dtype, fn, origin)


def broadcast_index(ctx: Ctx, t: Tensor, idx: Sequence[Expr]) -> tuple[Expr, ...]:
    """Index into ``t`` for an element of a result with ``len(idx)`` dims: 0-d operands of an
    elementwise op broadcast, others have the result's shape."""
    if not t.shape:
        return ()
    return tuple(idx)


def map_op(ctx: Ctx, op: str, *args: Tensor, dtype=None, origin: str = "") -> Tensor:
    """Elementwise kernel op over tensors of one shape (0-d operands broadcast)."""
    shape = max((a.shape for a in args), key=len)
    if dtype is None:
        dtype = BOOL if op in COMPARE or op in ("isnan", "is_finite") else args[0].dtype

    def fn(idx):
        return ctx.op(op, *[a.at(broadcast_index(ctx, a, idx)) for a in args], dtype=dtype)

    return Tensor(shape, dtype, fn, origin or op)


def map_fn(ctx: Ctx, fn: Callable[..., Expr], *args: Tensor, dtype, origin: str) -> Tensor:
    """Elementwise tensor computing ``fn(*elements)`` with scalar expression builders."""
    shape = max((a.shape for a in args), key=len)

    def at(idx):
        return fn(*[a.at(broadcast_index(ctx, a, idx)) for a in args])

    return Tensor(shape, dtype, at, origin)


def reduce_identity(op: str, dtype) -> object:
    """The identity element of a reduction monoid in ``dtype``."""
    dtype = np.dtype(dtype)
    if op == "add" or op == "or" or op == "xor":
        return False if dtype.kind == "b" else 0
    if op == "mul" or op == "and":
        return True if dtype.kind == "b" else (1 if op == "mul" else -1)
    if op == "max":
        if dtype.kind == "f":
            return -np.inf
        return False if dtype.kind == "b" else np.iinfo(dtype).min
    if op == "min":
        if dtype.kind == "f":
            return np.inf
        return True if dtype.kind == "b" else np.iinfo(dtype).max
    raise ValueError(f"no identity for reduction {op!r}")


#: primitive -> lowering rule ``rule(ctx, *tensors, **params) -> Tensor | list[Tensor]``.
#: Rules live beside their primitives in ``fungrad/lax``; the registry test checks coverage.
lowering_rules: dict = {}


def register_lowering(prim, rule=None):
    """Register ``rule`` for ``prim`` (usable as a decorator)."""
    if rule is None:
        return lambda r: register_lowering(prim, r)
    lowering_rules[prim] = rule
    return rule


def elementwise_lowering(prim, op: str) -> None:
    """Lower ``prim`` to the one kernel op ``op`` (result dtype from the primitive)."""

    def rule(ctx, *args, **params):
        return map_op(ctx, op, *args, origin=prim.name)

    lowering_rules[prim] = rule


# -- shared pieces of lowering rules ---------------------------------------------------------------


def transposed(
    ctx: Ctx, x: Tensor, permutation: Sequence[int], origin: str = "transpose"
) -> Tensor:
    """``x.transpose(permutation)`` as index arithmetic (a view of x's buffer stays a view)."""
    perm = tuple(permutation)
    inv = [0] * len(perm)
    for j, d in enumerate(perm):
        inv[d] = j
    t = Tensor(
        tuple(x.shape[d] for d in perm),
        x.dtype,
        lambda idx: x.at(tuple(idx[inv[d]] for d in range(len(perm)))),
        origin,
    )
    if x.view is not None:
        buf, p = x.view
        t.view = (buf, tuple(p[q] for q in perm))
    return t


def reduced(
    ctx: Ctx,
    x: Tensor,
    axes: Sequence[int],
    op: str,
    acc_dtype=None,
    out_dtype=None,
    origin: str = "reduce",
) -> Tensor:
    """``op``-reduce ``x`` over ``axes`` (innermost loop over the last reduced axis).
    Elements are converted to ``acc_dtype`` before accumulating and the result to
    ``out_dtype`` (both default to x's dtype)."""
    axes = tuple(sorted(axes))
    acc_dtype = np.dtype(acc_dtype or x.dtype)
    out_dtype = np.dtype(out_dtype or x.dtype)
    kept = [d for d in range(x.ndim) if d not in axes]
    extents = [x.shape[a] for a in axes]

    def element(idx):
        def body(*r):
            full = [None] * x.ndim
            for d, i in zip(kept, idx):
                full[d] = i
            for a, i in zip(axes, r):
                full[a] = i
            return ctx.convert(x.at(tuple(full)), acc_dtype)

        if not axes:
            return ctx.convert(body(), out_dtype)
        if 0 in extents and op not in ("argmax", "argmin"):
            return ctx.const(reduce_identity(op, acc_dtype), out_dtype)
        return ctx.convert(ctx.reduce(op, extents, body), out_dtype)

    return Tensor(tuple(x.shape[d] for d in kept), out_dtype, element, origin)


def clamp_index(ctx: Ctx, i: Expr, lo: int, hi: int) -> Expr:
    """``min(max(i, lo), hi)`` on index values (keeps loads in bounds)."""
    if i.is_const:
        return ctx.iconst(min(max(i.attr, lo), hi))
    return ctx.op("min", ctx.op("max", i, ctx.iconst(lo)), ctx.iconst(hi))


def scalar_index(ctx: Ctx, t: Tensor) -> Expr:
    """The value of a 0-d integer tensor as an index."""
    return ctx.convert(t.at(()), INDEX)


def innermost_loop(chain: dict, e: Expr) -> Var | None:
    """The loop a renderer evaluates ``e`` in: the innermost of the loops binding its free
    variables (``chain`` maps each variable to the loops enclosing it, outermost first)."""
    best: tuple[Var, ...] = ()
    for v in e.free:
        c = chain[v]
        if len(c) > len(best):
            best = c
    return best[-1] if best else None


def replace_nodes(ctx: Ctx, e: Expr, by: dict, memo: dict) -> Expr:
    """``e`` with every node whose id is a key of ``by`` replaced by its value (nodes above
    them rebuilt, interned; a rebuilt reduction keeps its origin tensor). ``memo`` (id of an
    old node -> its replacement) is filled for every node visited. (Post-order from an
    explicit stack: expressions may be thousands of nodes deep.)"""
    stack = [e]
    while stack:
        x = stack[-1]
        if id(x) in memo:
            stack.pop()
            continue
        got = by.get(id(x))
        if got is None:
            first = [a for a in x.args if id(a) not in memo]
            if first:
                stack.extend(first)
                continue
            args = tuple(memo[id(a)] for a in x.args)
            got = x
            if any(a is not b for a, b in zip(args, x.args)):
                got = ctx.node(x.op, args, x.dtype, x.attr)
                if x.op == "reduce" and x in ctx.reduce_origin:
                    ctx.reduce_origin.setdefault(got, ctx.reduce_origin[x])
        memo[id(x)] = got
        stack.pop()
    return memo[id(e)]


def substitute(ctx: Ctx, e: Expr, var: Var, by: Expr, memo: dict | None = None) -> Expr:
    """``e`` with loop variable ``var`` replaced by the index expression ``by`` (interned, so
    the result is identical to a node built directly at that index)."""
    memo = {} if memo is None else memo
    if var not in e.free:
        return e
    stack = [e]
    while stack:  # post-order over the nodes that depend on var, from an explicit stack
        x = stack[-1]
        if id(x) in memo:
            stack.pop()
            continue
        if x.op == "idx":
            memo[id(x)] = by
            stack.pop()
            continue
        first = [a for a in x.args if var in a.free and id(a) not in memo]
        if first:
            stack.extend(first)
            continue
        args = tuple(memo[id(a)] if var in a.free else a for a in x.args)
        memo[id(x)] = ctx.node(x.op, args, x.dtype, x.attr)
        stack.pop()
    return memo[id(e)]
