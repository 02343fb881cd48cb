"""WGSL compute shaders for the steps of a fusion :class:`~fungrad.lowering.fusion.Program`.

The GPU twin of ``llvm.py``: the same kernels (``fusion.Kernel``: a loop nest of stores of
scalar expressions) become one compute shader each, and ``fusion.Gemm`` becomes a tiled
matmul shader. ``gpu_executable.py`` decides where buffers live and runs the shaders.

Memory. Every device buffer is bound as ``array<u32>`` and each element is one 32-bit word
(WGSL has no 8-, 16- or 64-bit storage types in core): float32 and int32 values are
``bitcast``, bool is 0 or 1. A buffer is addressed as *(binding, word offset)*, so several
arrays can share one device buffer (the temporaries' arena, the constants).

Parallelism. A parallel kernel runs one invocation per element of its loop nest (flattened,
``KERNEL_WORKGROUP`` to a workgroup; more than 65535 workgroups use a 2-D grid). Its math
functions are written out in its body and its ``let`` statements ordered by dependency level
(:func:`schedule`), so that independent chains interleave. Reductions are loops inside the
invocation, each node computed at the outermost loop where its indices are defined, as on the
CPU; the GPU planner stores reductions that would otherwise be recomputed by every invocation
of a row. Where outputs are few, a kernel's reductions can be workgroup trees instead
(:class:`Tree`). A scatter (``parallel=False``: updates may collide) runs one invocation per
update with atomics, the last update winning an overwrite as in the serial loop
(:class:`Scatter`); a scan (cumulative sums: a store reading what the previous iteration
stored, :func:`scan_of`) runs one invocation per line or reduce-then-scan over blocks
(:func:`render_scan`); other serial kernels run their loop nest in one invocation, in order.
Sorts are rank sorts for short rows and bitonic networks for long ones (:func:`render_sort`,
:func:`render_bitonic`). Every shader records the loop iterations an invocation may run
(``Shader.loop_iterations``: lavapipe stops them after 65535).

Semantics follow ``llvm_ops.py`` (JAX's): integer division never traps (``x / 0 = -1``,
``x % 0 = x``) and is done on magnitudes (OpenGL's signed ``/`` and ``%`` are wrong for
negatives); float max/min propagate NaN and order ``-0 < +0`` (WGSL's builtins drop NaN);
NaN is tested on the bits (Vulkan drivers fold ``v != v`` to false); float -> int saturates
and maps NaN to 0; float ``rem`` is C's exact ``fmod`` (WGSL's ``%`` is ``x - y * trunc(x /
y)``, wrong for large quotients). Shader compilers simplify float algebra (x * 0 -> 0, x - x
-> 0, ...), so no float operation gets a literal operand or two operands reaching one value
(:meth:`_KernelShader._protect`), which also keeps every constant expression the WGSL
validator rejects (0.0 / 0.0, 1i << 31u, shifts by 32 or more) out of the shaders. Float sums
(reductions, scans, matmul contractions) are blocked, their error bounded.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass

import numpy as np

from fungrad.lowering.fusion import Gemm, Kernel, LoweringError, _walk
from fungrad.lowering.kernel import (
    INDEX,
    MATH_UNARY,
    Expr,
    Var,
    innermost_loop,
    reduce_identity,
)
from fungrad.lowering.math import wgsl as wgsl_math

#: element dtypes a GPU program may use (one 32-bit word each on the device)
DEVICE_DTYPES = frozenset(np.dtype(d) for d in (np.float32, np.int32, np.uint32, np.bool_))
WORKGROUP = 64
#: invocations per workgroup of a kernel run one invocation per element: llvmpipe has a cost
#: per workgroup, and 256 made the benchmark chain 8% faster there (the hand-written kernel:
#: 11%); the sort and scan shaders measured slower with 256 and keep WORKGROUP
KERNEL_WORKGROUP = 256
MAX_GROUPS = 65535
#: kernel ops computed by a wgsl_math function (float32 only)
_MATH_OPS = MATH_UNARY | {"pow", "atan2"}


def wgsl_type(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == INDEX or dtype == np.int32:
        return "i32"
    if dtype == np.float32:
        return "f32"
    if dtype == np.uint32:
        return "u32"
    if dtype == np.bool_:
        return "bool"
    raise LoweringError(f"jit(backend='gpu'): no WGSL type for {dtype.name}")


def literal(value, dtype) -> str:
    """A WGSL literal of ``dtype`` (index values are i32)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if value else "false"
    if dtype == np.float32:
        v = np.float32(value)
        if np.isfinite(v) and (v == 0 or abs(v) >= np.finfo(np.float32).tiny):
            return f"{float(v)!r}f"
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        return f"bitcast<f32>({bits:#010x}u)"
    if dtype == np.uint32:
        return f"{int(value) & 0xFFFFFFFF}u"
    v = int(value)
    if not -2**31 <= v < 2**31:
        raise LoweringError(f"jit(backend='gpu'): the index or int32 constant {v} does not fit "
                            "in 32 bits; WGSL has no 64-bit integers")
    return "bitcast<i32>(0x80000000u)" if v == -2**31 else f"{v}i"


# -- helper functions a shader may need (emitted once each, only when used) -------------------

_HELPERS = {
    "isnan": """fn fg_isnan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}""",
    "max_f32": """fn fg_max_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)); }
  return select(b, a, a > b);
}""",
    "min_f32": """fn fg_min_f32(a: f32, b: f32) -> f32 {
  if (fg_isnan(a) || fg_isnan(b)) { return a + b; }
  if (a == b) { return bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)); }
  return select(b, a, a < b);
}""",
    "div_i32": """fn fg_div_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return -1i; }
  let ma = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);
  let mb = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);
  let q = ma / mb;
  return bitcast<i32>(select(q, 0u - q, (a < 0i) != (b < 0i)));
}""",
    "rem_i32": """fn fg_rem_i32(a: i32, b: i32) -> i32 {
  if (b == 0) { return a; }
  let ma = select(bitcast<u32>(a), 0u - bitcast<u32>(a), a < 0i);
  let mb = select(bitcast<u32>(b), 0u - bitcast<u32>(b), b < 0i);
  let r = ma % mb;
  return bitcast<i32>(select(r, 0u - r, a < 0i));
}""",
    "div_u32": """fn fg_div_u32(a: u32, b: u32) -> u32 {
  if (b == 0u) { return 0xffffffffu; }
  return a / b;
}""",
    "rem_u32": """fn fg_rem_u32(a: u32, b: u32) -> u32 {
  if (b == 0u) { return a; }
  return a % b;
}""",
    # fmod, exact: long division of |x| by |y| on the exponents, each step an exact subtraction
    "rem_f32": """fn fg_rem_f32(x: f32, y: f32) -> f32 {
  let ax = abs(x);
  let ay = abs(y);
  if (fg_isnan(x) || fg_isnan(y) || ax == bitcast<f32>(0x7f800000u) || ay == 0.0f) {
    return bitcast<f32>(0x7fc00000u);
  }
  if (ay == bitcast<f32>(0x7f800000u) || ax < ay) { return x; }
  var r = ax;
  for (var i = 0i; i < 300i && r >= ay; i++) {
    let k = (bitcast<u32>(r) >> 23u) - (bitcast<u32>(ay) >> 23u);
    var t = bitcast<f32>(bitcast<u32>(ay) + (k << 23u));
    if (t > r) { t = t * 0.5f; }
    r = r - t;
  }
  return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));
}""",
    "round_away": """fn fg_round_away(x: f32) -> f32 {
  let t = trunc(x);
  return select(t, t + sign(x), abs(x - t) >= 0.5f);
}""",
    "nextafter": """fn fg_nextafter(x: f32, y: f32) -> f32 {
  if (fg_isnan(x) || fg_isnan(y)) { return x + y; }
  if (x == y) { return y; }
  if (x == 0.0f) { return bitcast<f32>((bitcast<u32>(y) & 0x80000000u) | 1u); }
  let up = (x < y) == (x > 0.0f);
  let b = bitcast<u32>(x);
  return bitcast<f32>(select(b - 1u, b + 1u, up));
}""",
    "f2i": """fn fg_f2i(x: f32) -> i32 {
  if (fg_isnan(x)) { return 0i; }
  if (x >= 2147483648.0f) { return 2147483647i; }
  if (x < -2147483648.0f) { return bitcast<i32>(0x80000000u); }
  return i32(x);
}""",
    "f2u": """fn fg_f2u(x: f32) -> u32 {
  if (fg_isnan(x) || x <= 0.0f) { return 0u; }
  if (x >= 4294967296.0f) { return 0xffffffffu; }
  return u32(x);
}""",
}
_HELPER_DEPS = dict.fromkeys(("rem_f32", "max_f32", "min_f32", "nextafter", "f2i", "f2u"),
                             ("isnan",))


class _Source:
    """The helper functions one shader needs, in dependency order."""

    def __init__(self, fused_fma: bool):
        self.fused_fma = fused_fma
        self.helpers: dict[str, str] = {}
        self.math: dict[str, str] = {}

    def need(self, name: str) -> str:
        if name not in self.helpers:
            for dep in _HELPER_DEPS.get(name, ()):
                self.need(dep)
            self.helpers[name] = _HELPERS[name]
        return name

    def need_math(self, name: str) -> str:
        fn, texts = wgsl_math.function(name, self.fused_fma)
        self._add_math(texts)
        return fn

    def inline_math(self, name: str, args: list[str], prefix: str, zero: str
                    ) -> tuple[list[str], str] | None:
        """(let statements, result) of math function ``name`` written out in the caller
        (``wgsl_math.inline``; ``zero``: the caller's opaque zero), its callees added to the
        prelude; None where it must be called instead."""
        got = wgsl_math.inline(name, args, prefix, self.fused_fma, zero)
        if got is None:
            return None
        lines, result, texts = got
        self._add_math(texts)
        return lines, result

    def _add_math(self, texts: list[tuple[str, str]]) -> None:
        for key, text in texts:
            if key == "isnan":
                self.need("isnan")
            else:
                self.math.setdefault(key, text)

    def prelude(self) -> str:
        return "\n\n".join([*self.helpers.values(), *self.math.values()])


# -- the shaders ----------------------------------------------------------------------------------

@dataclass
class Shader:
    """One compute shader and how to dispatch it.

    ``bindings``: (slot key, writable) per ``@binding(i)``: the device buffer the executable
    binds there. ``grid``: workgroups in x, y, z (0 workgroups: nothing to run).
    ``loop_iterations``: loop iterations one invocation runs, all loops together (an upper
    bound; some adapters stop an invocation's loops after 65535: ``gpu.Runtime.loop_limit``)."""
    name: str
    source: str
    bindings: list[tuple[str, bool]]
    grid: tuple[int, int, int]
    loop_iterations: int = 0


def grid_1d(invocations: int, per_group: int) -> tuple[int, int, int]:
    """Workgroups for ``invocations`` flat invocations: 2-D beyond 65535 groups."""
    if invocations >= 2**31:  # (invocations are numbered by an i32)
        raise LoweringError(f"jit(backend='gpu'): {invocations} invocations (one per element) "
                            "exceed the 2**31 - 1 a shader can number; split the array or use "
                            "backend='cpu'")
    groups = -(-invocations // per_group)
    if groups <= MAX_GROUPS:
        return (groups, 1, 1)
    y = -(-groups // MAX_GROUPS)
    if y > MAX_GROUPS:
        raise LoweringError(f"jit(backend='gpu'): {invocations} invocations exceed the "
                            f"{MAX_GROUPS}x{MAX_GROUPS} workgroup grid")
    return (MAX_GROUPS, y, 1)


@dataclass(frozen=True)
class Scope:
    """Where a step runs inside control flow (the GPU runs loops by re-dispatching bodies).

    ``loops``: enclosing loops; loop ``d``'s iteration count is word ``d`` of the ``ctl``
    buffer, read as ``it<d>`` (a view's offset, such as a scan's row of ``xs``, is an
    expression in it). ``guards``: enclosing ``cond`` branches as (index buffer, branch,
    number of branches): the step does nothing unless every index selects its branch."""
    loops: int = 0
    guards: tuple = ()


TOP = Scope()


class _Slots:
    """Binding numbers of the device buffers a shader touches."""

    def __init__(self, place: dict[int, tuple[str, int | str]]):
        self.place = place
        self.keys: dict[str, int] = {}
        self.writable: set[str] = set()
        self.atomic: set[str] = set()  # bound as array<atomic<u32>>: read with atomicLoad

    def ref(self, buf, index: str, write: bool = False) -> str:
        key, offset = self.place[buf.id]
        return self.word(key, offset, index, write)

    def word(self, key: str, offset: int | str, index: str, write: bool = False) -> str:
        b = self.keys.setdefault(key, len(self.keys))
        if write:
            self.writable.add(key)
        if isinstance(offset, str):
            at = f"{offset} + {index}"
        else:
            at = index if offset == 0 else f"{offset}i + {index}"
        if key in self.atomic:
            return f"atomicLoad(&b{b}[{at}])" if not write else f"&b{b}[{at}]"
        return f"b{b}[{at}]"

    def scope_lines(self, scope: Scope) -> tuple[list[str], str | None]:
        """(lines defining ``it<d>``, the guard condition or None) for ``scope``."""
        lines = [f"  let it{d} = bitcast<i32>({self.word('ctl', 0, f'{d}i')});"
                 for d in range(scope.loops)]
        conds = []
        for j, (index, branch, n) in enumerate(scope.guards):
            raw = _from_word(self.ref(index, "0i"), index.dtype)
            value = f"i32({raw})" if wgsl_type(index.dtype) != "i32" else raw
            lines.append(f"  let sel{j} = clamp({value}, 0i, {n - 1}i);")
            conds.append(f"sel{j} == {branch}i")
        return lines, " && ".join(conds) or None

    def declarations(self) -> list[str]:
        out = []
        for key, b in self.keys.items():
            access = "read_write" if key in self.writable else "read"
            t = "atomic<u32>" if key in self.atomic else "u32"
            out.append(f"@group(0) @binding({b}) var<storage, {access}> b{b}: array<{t}>;")
        return out

    def bindings(self) -> list[tuple[str, bool]]:
        return [(k, k in self.writable) for k in self.keys]


def _from_word(word: str, dtype) -> str:
    t = wgsl_type(dtype)
    if t == "u32":
        return word
    if t == "bool":
        return f"({word} != 0u)"
    return f"bitcast<{t}>({word})"


def _to_word(value: str, dtype) -> str:
    t = wgsl_type(dtype)
    if t == "u32":
        return value
    if t == "bool":
        return f"select(0u, 1u, {value})"
    return f"bitcast<u32>({value})"


class _KernelShader:
    """Writes one kernel as a shader (the structure mirrors ``llvm._KernelWriter``)."""

    def __init__(self, kern: Kernel, place, fused_fma: bool, scope: Scope,
                 tree: Tree | None = None, scatter: Scatter | None = None):
        self.kern = kern
        self.tree = tree
        self.tree_at = 0
        self.outputs = math.prod(v.extent for v in kern.loops)
        self.scope_of = scope
        self.slots = _Slots(place)
        self.src = _Source(fused_fma)
        self.scatter = scatter
        self.serial = not kern.parallel and scatter is None
        if scatter is not None and scatter.mode != "write":
            st, = kern.stores
            self.slots.atomic.add(place[st.buffer.id][0] if scatter.mode == "combine"
                                  else "arena")
        self.lines: dict[Var | None, list[str]] = {None: []}
        self.chain: dict[Var, tuple[Var, ...]] = {}
        self.trips: dict[Var | None, int] = {None: 1}  # iterations of each loop's body
        self.iterations = 0
        self.names: dict[int, str] = {}
        self.n = 0
        self.zero = False  # the opaque zero of written-out math functions is defined
        self.zeros = 0  # fresh opaque zeros defined (``fg_z<k>``, see :meth:`_opaque`)
        self.literals: dict[str, str] = {}  # literal -> its opaque name (_opaque_literal)
        self.reach: dict[tuple[int, int], frozenset] = {}

    def tmp(self, hint: str = "t") -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def scope(self, e: Expr) -> Var | None:
        return innermost_loop(self.chain, e)

    def let(self, e: Expr, text: str) -> str:
        name = self.tmp()
        self.lines[self.scope(e)].append(f"  let {name} = {text};")
        return name

    # values
    def value(self, e: Expr) -> str:
        name = self.names.get(id(e))
        if name is None:
            if e.op == "const":
                name = literal(e.attr, e.dtype)
            elif e.op == "idx":
                name = f"v{e.attr.id}"
            elif e.op == "reduce":
                name = self._reduce(e)
            else:
                args = self._protect(e, [self.value(a) for a in e.args])
                name = self._inline(e, args) or self.let(e, self._expression(e, args))
            self.names[id(e)] = name
        return name

    # Shader compilers simplify float algebra as if it were real algebra (Mesa's NIR applies
    # its inexact rules to every float operation: WGSL cannot mark one exact), which loses
    # IEEE results: x * 0 -> 0 (NaN, inf, -0), x + 0 -> x (-0), 0 - x -> -x, x / 0 -> x,
    # x - x -> 0, (a + b) - b -> a, (x + c1) + c2 -> x + (c1 + c2), a * b + a * c ->
    # a * (b + c), x + c < d -> x < d - c, (b < a ? a : b) -> max(a, b) (NaN, -0). Every
    # rule needs a constant operand or an operand met twice, so a float operation gets
    # neither: a literal operand is OR-ed with an opaque zero, and where both operands reach
    # one value (within _REACH operations; a select's values and its condition) the second
    # is hidden behind a zero of its own (one shared zero would let the compiler match two
    # hidings of one value). Cost: an integer OR per hidden operand.

    def _protect(self, e: Expr, args: list[str]) -> list[str]:
        """``args`` of float operation ``e`` with its literal operands, and an operand that
        meets the other, made opaque to the shader compiler (see above)."""
        if e.op == "select" and wgsl_type(e.dtype) == "f32":  # cond ? a : b
            cond = self._reaches(e.args[0])  # (c < a ? a : c -> max(a, c), a - c < 0 ...)
            return [args[0], *(self._opaque(v, a) if self._reaches(a) & cond else v
                               for a, v in zip(e.args[1:], args[1:]))]
        if e.op in ("select", "convert", "bitcast", "load") or not e.args:
            return args
        t = wgsl_type(e.args[0].dtype)
        if t in ("i32", "u32") and all(a.op == "const" for a in e.args):
            # a constant expression WGSL may reject (1i << 31u overflows, 5i / 0i)
            return [self._opaque_literal(args[0], t), *args[1:]]
        if t != "f32":
            return args
        out = [self._opaque_literal(v) if a.op == "const" else v
               for a, v in zip(e.args, args)]
        if e.op in _SHARING_OPS and self._reaches(e.args[0]) & self._reaches(e.args[1]):
            out[1] = self._opaque(out[1], e.args[1])
        return out

    def _reaches(self, e: Expr, depth: int = 0) -> frozenset:
        """The values ``e`` computes from within ``_REACH`` operations (literals by text)."""
        key = (id(e), depth)
        got = self.reach.get(key)
        if got is None:
            if e.op == "const":
                got = frozenset({literal(e.attr, e.dtype)})
            else:
                got = frozenset({id(e)})
                if depth < _REACH and e.op not in ("load", "reduce", "idx"):
                    for a in e.args:
                        got |= self._reaches(a, depth + 1)
            self.reach[key] = got
        return got

    def _zero(self) -> str:
        """The shader's shared opaque u32 zero (defined once, in the top-level lines)."""
        if not self.zero:  # every shader with kernel values has ``nwg`` (uniform) in main
            self.lines[None].append(f"  let {_ZERO} = ((nwg.x * nwg.x) + nwg.x) & 1u;")
            self.zero = True
        return _ZERO

    def _opaque_literal(self, text: str, t: str = "f32") -> str:
        """A literal of WGSL type ``t`` as a value the shader compiler cannot see (a
        top-level let)."""
        name = self.literals.get(text)
        if name is None:
            name = self.literals[text] = self.tmp("c")
            word = text if t == "u32" else f"bitcast<u32>({text})"
            value = f"{word} | {self._zero()}"
            self.lines[None].append(f"  let {name} = "
                                    f"{value if t == 'u32' else f'bitcast<{t}>({value})'};")
        return name

    def _opaque(self, value: str, e: Expr) -> str:
        """``value`` (of ``e``) OR-ed with a fresh opaque zero: u (u + 2k + 1) is even."""
        self.zeros += 1
        z = f"fg_z{self.zeros}"
        self.lines[None].append(f"  let {z} = (nwg.x * (nwg.x + {2 * self.zeros + 1}u)) & 1u;")
        name = self.tmp("h")
        self.lines[self.scope(e)].append(
            f"  let {name} = bitcast<f32>(bitcast<u32>({value}) | {z});")
        return name

    def _inline(self, e: Expr, args: list[str]) -> str | None:
        """A float32 math function written out here rather than called (so that
        :func:`schedule` can interleave it with the rest); None for everything else."""
        if e.op not in _MATH_OPS or wgsl_type(e.args[0].dtype) != "f32":
            return None
        prefix = self.tmp("m")
        lines = self.lines[self.scope(e)]
        for i, a in enumerate(args):  # a literal argument gets a name: (-a0) must not be --1.0f
            if not a.isidentifier():
                args[i] = f"{prefix}_a{i}"
                lines.append(f"  let {args[i]} = {a};")
        got = self.src.inline_math(e.op, args, prefix, _ZERO)
        if got is None:
            return None
        self._zero()
        body, result = got
        lines += body
        return result if result.isidentifier() else self.let(e, result)

    def _expression(self, e: Expr, a: list[str]) -> str:
        op = e.op
        if op == "load":
            return _from_word(self.slots.ref(e.attr, a[0]), e.attr.dtype)
        if op == "select":
            return f"select({a[2]}, {a[1]}, {a[0]})"
        if op == "convert":
            return self._convert(e.args[0].dtype, e.dtype, a[0])
        if op == "bitcast":
            return f"bitcast<{wgsl_type(e.dtype)}>({a[0]})"
        return self._op(op, e.args[0].dtype, a)

    def _op(self, op: str, dt, a: list[str]) -> str:
        t = wgsl_type(dt)
        f, b = t == "f32", t == "bool"
        if op in ("lt", "le", "gt", "ge") and b:  # WGSL orders no bools: false < true
            x, y = (a[0], a[1]) if op in ("lt", "le") else (a[1], a[0])
            return f"(!{x} {'&&' if op in ('lt', 'gt') else '||'} {y})"
        if op in ("eq", "ne", "lt", "le", "gt", "ge"):
            sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
            if f and op == "ne":  # not (a == b): true for NaN even where != is folded
                return f"!({a[0]} == {a[1]})"
            return f"({a[0]} {sym} {a[1]})"
        if op in ("add", "sub", "mul") and b:
            return f"({a[0]} {'|' if op == 'add' else '&' if op == 'mul' else '!='} {a[1]})"
        if op in ("idiv", "irem") and a[1] == literal(0, dt):  # (5i / 0i) is rejected
            return f"fg_{self.src.need(('div_' if op == 'idiv' else 'rem_') + t)}({a[0]}, {a[1]})"
        if op in ("add", "sub", "mul", "idiv", "irem"):
            sym = {"add": "+", "sub": "-", "mul": "*", "idiv": "/", "irem": "%"}[op]
            return f"({a[0]} {sym} {a[1]})"
        if op in ("div", "rem"):
            if f and op == "div":
                return f"({a[0]} / {a[1]})"
            return f"fg_{self.src.need(f'{op}_{t}')}({a[0]}, {a[1]})"
        if op in ("max", "min"):
            return self.minmax(op, dt, a[0], a[1])
        if op in ("and", "or", "xor"):
            sym = {"and": "&", "or": "|", "xor": "!=" if b else "^"}[op]
            return f"({a[0]} {sym} {a[1]})"
        if op == "not":
            return f"(!{a[0]})" if b else f"(~{a[0]})"
        if op in ("shl", "shr_logical", "shr_arith"):
            # a shift by a constant >= 32 is a shader-creation error in WGSL, even in the
            # unselected side of a select: the shift is by min(s, 31) wherever s may be that
            s = f"u32({a[1]})" if t == "i32" else a[1]
            zero, by = literal(0, dt), f"min({s}, 31u)"
            if op == "shl":
                return f"select({a[0]} << {by}, {zero}, {s} >= 32u)"
            if op == "shr_logical":
                shifted = (f"bitcast<i32>(bitcast<u32>({a[0]}) >> {by})" if t == "i32"
                           else f"({a[0]} >> {by})")
                return f"select({shifted}, {zero}, {s} >= 32u)"
            signed = f"bitcast<i32>({a[0]})" if t == "u32" else a[0]
            r = f"({signed} >> {by})"
            return f"bitcast<u32>{r}" if t == "u32" else r
        if op == "neg":  # (a literal: -(-5i), never --5i)
            return f"(-({a[0]}))" if a[0].startswith("-") else f"(-{a[0]})"
        if op == "abs":
            return f"abs({a[0]})"
        if op == "sign":
            if f:
                return (f"select(select({a[0]}, -1.0f, {a[0]} < 0.0f), 1.0f, "
                        f"{a[0]} > 0.0f)")
            return f"sign({a[0]})" if t == "i32" else f"select(0u, 1u, {a[0]} != 0u)"
        if op in ("floor", "ceil", "sqrt"):
            return f"{op}({a[0]})"
        if op == "round_even":
            return f"round({a[0]})"
        if op == "round_away":
            return f"fg_{self.src.need('round_away')}({a[0]})"
        if op == "rsqrt":
            return f"(1.0f / sqrt({a[0]}))"
        if op == "popcnt":
            return f"countOneBits({a[0]})"
        if op == "clz":
            return f"countLeadingZeros({a[0]})"
        if op == "isnan":
            return f"fg_{self.src.need('isnan')}({a[0]})"
        if op == "is_finite":
            return f"((bitcast<u32>({a[0]}) & 0x7f800000u) != 0x7f800000u)"
        if op == "nextafter":
            return f"fg_{self.src.need('nextafter')}({a[0]}, {a[1]})"
        if op in _MATH_OPS:
            if not f:
                raise LoweringError(f"jit(backend='gpu'): {op} of {np.dtype(dt).name}")
            return f"{self.src.need_math(op)}({', '.join(a)})"
        raise LoweringError(f"jit(backend='gpu'): no WGSL for kernel op {op!r} on "
                            f"{np.dtype(dt).name}")

    def minmax(self, op: str, dt, x: str, y: str) -> str:
        t = wgsl_type(dt)
        if t == "f32":
            return f"fg_{self.src.need(op + '_f32')}({x}, {y})"
        if t == "bool":
            return f"({x} {'|' if op == 'max' else '&'} {y})"
        return f"{op}({x}, {y})"

    def _convert(self, src, dst, x: str) -> str:
        s, d = wgsl_type(src), wgsl_type(dst)
        if s == d:
            return x
        if d == "bool":
            return f"!({x} == 0.0f)" if s == "f32" else f"({x} != {literal(0, src)})"
        if s == "bool":
            return f"select({literal(0, dst)}, {literal(1, dst)}, {x})"
        if d == "f32":
            return f"f32({x})"
        if s == "f32":
            return f"fg_{self.src.need('f2i' if d == 'i32' else 'f2u')}({x})"
        return f"bitcast<{d}>({x})"  # i32 <-> u32 keep the bits, as numpy's astype does

    def combine(self, op: str, dt, acc: str, val: str) -> str:
        if wgsl_type(dt) == "f32" and _FLOAT_LITERAL.fullmatch(val):
            val = self._opaque_literal(val)  # (a store's combine, say x.at[i].add(-0.0))
        if op in ("max", "min"):
            return self.minmax(op, dt, acc, val)
        return self._op(op, dt, [acc, val])

    def _better(self, op: str, dt, val: str, acc: str, ties: tuple[str, str] | None) -> str:
        """Whether ``val`` replaces ``acc`` in an argmax/argmin: larger (smaller), NaN beating
        any number; ``ties`` (val's position, acc's): an equal value at a smaller position
        (merging partial results: the first occurrence wins, as in the serial scan)."""
        better = self._op("gt" if op == "argmax" else "lt", dt, [val, acc])  # (bools too)
        same = f"({val} == {acc})"
        if wgsl_type(dt) == "f32":
            isnan = f"fg_{self.src.need('isnan')}"
            better = f"({better} || ({isnan}({val}) && !{isnan}({acc})))"
            same = f"({same} || ({isnan}({val}) && {isnan}({acc})))"
        if ties is not None:
            better = f"({better} || ({same} && {ties[0]} < {ties[1]}))"
        return better

    def _reduce(self, e: Expr) -> str:
        red = e.attr
        parent = self.scope(e)
        if self.tree is not None and parent is None:
            return self._tree_reduce(e)
        base = self.chain[parent] if parent is not None else ()
        trips = self.trips[parent]
        for i, v in enumerate(red.vars):
            self.chain[v] = base + red.vars[:i + 1]
            self.lines[v] = []
            trips *= v.extent
            self.trips[v] = trips
            self.iterations += trips
        body = e.args[0]
        val = self.value(body)
        op = red.op
        arg = op in ("argmax", "argmin")
        dt = body.dtype
        if op in ("add", "mul") and wgsl_type(dt) == "f32" and \
                math.prod(v.extent for v in red.vars) <= _UNROLLED:
            val = self._opaque(val, body)  # (sum of [x, -x] gave 0 for NaN once unrolled)
        acc = self.tmp("acc")
        init = literal(reduce_identity({"argmax": "max", "argmin": "min"}.get(op, op), dt), dt)
        out = self.lines[parent]
        decl, update, final = self._accumulate(op, dt, acc, val, init)
        out += decl
        if arg:
            pos = self.tmp("pos")
            out.append(f"  var {pos}: i32 = 0i;")
        chunk: list[str] = []
        for v in red.vars:
            chunk.append(f"  for (var v{v.id}: i32 = 0i; v{v.id} < {v.extent}i; v{v.id}++) {{")
            chunk += self.lines.pop(v)
        if arg:
            flat = "0i"
            for v in red.vars:
                flat = f"({flat} * {v.extent}i + v{v.id})"
            chunk += [f"  if {self._better(op, dt, val, acc, None)} {{", f"    {acc} = {val};",
                      f"    {pos} = {flat};", "  }"]
        else:
            chunk += update
        chunk += ["  }"] * len(red.vars)
        out.extend(chunk + final)
        return pos if arg else acc

    def _accumulate(self, op: str, dt, acc: str, val: str, init: str
                    ) -> tuple[list[str], list[str], list[str]]:
        """(declarations, loop body, lines after the loop) folding ``val`` into ``acc`` with
        ``op``. A float sum is blocked, its error bounded: 16 elements go into a partial sum,
        16 of those into a second, 16 of those into a third, and those into ``acc``
        (``SUM_LEVELS``): error at most about (48 + n / 4096) roundings instead of n, a few
        ulps in practice (a serial sum of 60000 values near 1000 was 5400 ulps off; the
        blocks of 16 also keep sums of equal values, whose roundings add up, within two).
        Its zero is opaque: ``0 + x`` folded to ``x`` would keep a -0."""
        t = wgsl_type(dt)
        if op in ("argmax", "argmin"):  # (the caller writes the update)
            return [f"  var {acc}: {t} = {init};"], [], []
        if op != "add" or t != "f32":
            return ([f"  var {acc}: {t} = {init};"],
                    [f"  {acc} = {self.combine(op, dt, acc, val)};"], [])
        zero = self._opaque_literal(init)
        parts, n = [self.tmp("part") for _ in SUM_LEVELS], self.tmp("n")
        decl = [f"  var {v}: f32 = {zero};" for v in (acc, *parts)] + [f"  var {n}: u32 = 0u;"]
        update = [f"  {parts[0]} = {parts[0]} + {val};", f"  {n} = {n} + 1u;"]
        size, indent = 1, "  "
        for lower, upper in zip(parts, [*parts[1:], acc]):  # a full level moves up
            size *= SUM_LEVELS[parts.index(lower)]
            update += [f"{indent}if (({n} & {size - 1}u) == 0u) {{",
                       f"{indent}  {upper} = {upper} + {lower};", f"{indent}  {lower} = {zero};"]
            indent += "  "
        update += [f"{indent[:-2 * i]}}}" for i in range(1, len(parts) + 1)]
        rest = parts[0]
        for v in parts[1:]:
            rest = f"({v} + {rest})"
        return decl, update, [f"  {acc} = {acc} + {rest};"]

    def _tree_reduce(self, e: Expr) -> str:
        """A top-level reduction computed by the whole workgroup (see :class:`Tree`): each
        invocation folds a strided share (of the elements, or of the first pass's partials),
        then the workgroup combines its ``TREE_WG`` values pairwise in workgroup memory."""
        red, tree = e.attr, self.tree
        op, body = red.op, e.args[0]
        arg = op in ("argmax", "argmin")
        dt = body.dtype
        n = math.prod(v.extent for v in red.vars)
        g = tree.groups
        words = self.outputs * g
        at = tree.base + self.tree_at
        self.tree_at += words * (2 if arg else 1)
        vref = lambda i: self.slots.word("arena", at, i, write=tree.partial)  # noqa: E731
        pref = lambda i: self.slots.word("arena", at + words, i, write=tree.partial)  # noqa: E731
        r = self.tmp("r")
        start, step = "i32(lid)", TREE_WG
        if tree.partial:
            start, step = f"grp * {TREE_WG}i + i32(lid)", TREE_WG * g
        self.iterations += -(-(g if g > 1 and not tree.partial else n) // step)
        if g > 1 and not tree.partial:  # fold the partials of this output
            val = self.tmp("pv")
            pos_of = self.tmp("pp")
            chunk = [f"  for (var {r} = i32(lid); {r} < {g}i; {r} += {TREE_WG}i) {{",
                     f"    let {val} = {_from_word(vref(f'flat * {g}i + {r}'), dt)};"]
            if arg:
                chunk.append(f"    let {pos_of} = bitcast<i32>({pref(f'flat * {g}i + {r}')});")
        else:
            for i, v in enumerate(red.vars):
                self.chain[v] = red.vars[:i + 1]
                self.lines[v] = []
                self.trips[v] = -(-n // step)
            val = self.value(body)
            pos_of = r
            chunk = [f"  for (var {r} = {start}; {r} < {n}i; {r} += {step}i) {{"]
            stride = n
            for v in red.vars:
                stride //= v.extent
                q = r if stride == 1 else f"({r} / {stride}i)"
                chunk.append(f"  let v{v.id} = {q} % {v.extent}i;")
            for v in red.vars:
                chunk += self.lines.pop(v)
        acc, pos = self.tmp("acc"), self.tmp("pos")
        init = literal(reduce_identity({"argmax": "max", "argmin": "min"}.get(op, op), dt), dt)
        out = self.lines[None]
        decl, update, final = self._accumulate(op, dt, acc, val, init)
        out += [*decl, f"  var {pos}: i32 = 0i;"]
        if arg:
            ties = (pos_of, pos) if g > 1 and not tree.partial else None
            chunk += [f"  if {self._better(op, dt, val, acc, ties)} {{", f"    {acc} = {val};",
                      f"    {pos} = {pos_of};", "  }"]
        else:
            chunk += update
        out += [*chunk, "  }", *final, f"  fg_tv[lid] = {_to_word(acc, dt)};",
                f"  fg_tp[lid] = {pos};", "  workgroupBarrier();"]
        s = TREE_WG // 2
        while s:
            a, b = _from_word("fg_tv[lid]", dt), _from_word(f"fg_tv[lid + {s}u]", dt)
            out.append(f"  if (lid < {s}u) {{")
            if arg:
                better = self._better(op, dt, "rb", "ra", ("qb", "qa"))
                out += [f"    let ra = {a};", f"    let rb = {b};", "    let qa = fg_tp[lid];",
                        f"    let qb = fg_tp[lid + {s}u];",
                        f"    if {better} {{", f"      fg_tv[lid] = {_to_word('rb', dt)};",
                        "      fg_tp[lid] = qb;", "    }"]
            else:
                out.append(f"    fg_tv[lid] = {_to_word(self.combine(op, dt, a, b), dt)};")
            out += ["  }", "  workgroupBarrier();"]
            s //= 2
        if tree.partial:
            out.append(f"  if (lid == 0u) {{ {vref(f'flat * {g}i + grp')} = fg_tv[0];")
            if arg:
                out.append(f"    {pref(f'flat * {g}i + grp')} = bitcast<u32>(fg_tp[0]);")
            out.append("  }")
            result = acc  # the partial pass stores nothing: any value of the right type
        else:
            result = self.tmp("red")
            value = "fg_tp[0]" if arg else _from_word("fg_tv[0]", dt)
            out.append(f"  let {result} = {value};")
        out.append("  workgroupBarrier();")  # fg_tv is reused by the next reduction
        return result

    def _scatter_store(self, st, val: str, idx: str, mask: str | None, lines: list) -> None:
        """A scatter's store with its iterations in parallel (see :class:`Scatter`)."""
        sc, dt = self.scatter, st.buffer.dtype
        t = wgsl_type(dt)
        order = "bitcast<u32>(flat) + 1u"  # the iteration's place in the serial order, + 1
        body: list[str] = []
        if sc.mode == "claim":
            body.append(f"atomicMax({self.slots.word('arena', sc.base, idx, True)}, {order});")
        elif sc.mode == "write":
            won = f"{self.slots.word('arena', sc.base, idx)} == {order}"
            body += [f"if ({won}) {{",
                     f"  {self.slots.ref(st.buffer, idx, write=True)} = {_to_word(val, dt)};",
                     "}"]
        else:
            ptr = self.slots.ref(st.buffer, idx, write=True)
            op = st.combine
            builtin = {("add", "i32"): "atomicAdd", ("add", "u32"): "atomicAdd",
                       ("min", "u32"): "atomicMin", ("max", "u32"): "atomicMax",
                       ("add", "bool"): "atomicOr", ("max", "bool"): "atomicOr",
                       ("mul", "bool"): "atomicAnd", ("min", "bool"): "atomicAnd"}.get((op, t))
            if builtin is not None:
                body.append(f"{builtin}({ptr}, {_to_word(val, dt)});")
            else:  # compare-and-swap the combined value's bits until no one came between
                new = self.combine(op, dt, _from_word("old", dt), val)
                body += ["var old = atomicLoad(" + ptr + ");", "loop {",
                         f"  let r = atomicCompareExchangeWeak({ptr}, old, {_to_word(new, dt)});",
                         "  if (r.exchanged) { break; }", "  old = r.old_value;", "}"]
        if mask is not None:
            body = [f"if ({mask}) {{", *(f"  {b}" for b in body), "}"]
        lines.append("  {")
        lines += [f"    {b}" for b in body]
        lines.append("  }")

    # the shader
    def source(self) -> Shader:
        kern = self.kern
        loops = kern.loops
        for i, v in enumerate(loops):
            self.chain[v] = loops[:i + 1] if self.serial else ()
            if self.serial:
                self.lines[v] = []
                self.trips[v] = self.trips.get(loops[i - 1], 1) * v.extent if i else v.extent
                self.iterations += self.trips[v]
        for st in kern.stores:
            self._store(st)
        total = self.outputs
        head, guard = self.slots.scope_lines(self.scope_of)
        if self.tree is not None:
            return self._tree_source(head, guard)
        if guard is not None:
            head.append(f"  if (!({guard})) {{ return; }}")
        if self.serial:
            body = head + self.lines[None]
            for v in loops:
                body.append(f"  for (var v{v.id}: i32 = 0i; v{v.id} < {v.extent}i; v{v.id}++) {{")
                body += self.lines[v]
            body += ["  }"] * len(loops)
            size, grid = 1, (1 if total else 0, 1, 1)
        else:
            size = KERNEL_WORKGROUP
            grid = grid_1d(total, size) if total else (0, 1, 1)
            flat = "gid.x" if grid[1] == 1 else f"gid.x + gid.y * nwg.x * {size}u"
            head += [f"  let flat = i32({flat});",
                     f"  if (flat >= {literal(total, INDEX)}) {{ return; }}"]
            body = head + self._loop_indices() + self.lines[None]
        text = "\n".join([
            *self.slots.declarations(), "", self.src.prelude(), "",
            f"@compute @workgroup_size({size})",
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
            "@builtin(num_workgroups) nwg: vec3<u32>) {", *schedule(body), "}", ""])
        return Shader(kern.name, text, self.slots.bindings(), grid, self.iterations)

    def _loop_indices(self) -> list[str]:
        """The kernel's loop indices of the output element ``flat`` (row-major)."""
        out, stride = [], self.outputs
        if not stride:
            return out  # nothing runs
        for i, v in enumerate(self.kern.loops):
            stride //= v.extent
            q = "flat" if stride == 1 else f"(flat / {stride}i)"
            out.append(f"  let v{v.id} = {q if i == 0 else f'{q} % {v.extent}i'};")
        return out

    def _tree_source(self, head: list[str], guard: str | None) -> Shader:
        """The shader of a kernel whose top-level reductions are workgroup trees: one
        workgroup per output element (per output and group of elements in the first pass);
        barriers need uniform control flow, so the guard goes through workgroup memory."""
        tree = self.tree
        g = tree.groups if tree.partial else 1
        head = ["  let wg = i32(wid.x + wid.y * nwg.x);",
                f"  let flat = wg / {g}i;" if g > 1 else "  let flat = wg;",
                *([f"  let grp = wg % {g}i;"] if tree.partial else []),
                f"  if (flat >= {self.outputs}i) {{ return; }}", *head]
        name = f"{self.kern.name}_partial" if tree.partial else self.kern.name
        text = _workgroup_text(self.slots, self.src,
                               [f"var<workgroup> fg_tv: array<u32, {TREE_WG}>;",
                                f"var<workgroup> fg_tp: array<i32, {TREE_WG}>;"],
                               TREE_WG, head, guard,
                               schedule(self._loop_indices() + self.lines[None]))
        grid = grid_1d(self.outputs * g, 1) if self.outputs else (0, 1, 1)
        return Shader(name, text, self.slots.bindings(), grid, self.iterations)

    def _store(self, st) -> None:
        val = self.value(st.value)
        idx = self.value(st.index)
        mask = None if st.mask is None else self.value(st.mask)
        if self.tree is not None and self.tree.partial:
            return  # the first pass of a tree reduction writes partials only
        where = self.kern.loops[-1] if self.serial and self.kern.loops else None
        lines = self.lines[where]
        if self.scatter is not None:
            return self._scatter_store(st, val, idx, mask, lines)
        indent = "  "
        conds = [c for c in (mask, "lid == 0u" if self.tree is not None else None) if c]
        if conds:
            lines.append(f"  if ({' && '.join(f'({c})' for c in conds)}) {{")
            indent = "    "
        ref = self.slots.ref(st.buffer, idx, write=True)
        if st.combine is not None:
            old = _from_word(ref, st.buffer.dtype)
            val = self.combine(st.combine, st.buffer.dtype, old, val)
        lines.append(f"{indent}{ref} = {_to_word(val, st.buffer.dtype)};")
        if conds:
            lines.append("  }")


#: a u32 zero no compiler can prove (u (u + 1) is even), for written-out math functions'
#: opaque ORs (see wgsl_math); from the uniform ``nwg.x``, so computed once per workgroup
_ZERO = "fg_zero"
#: a float sum's levels of partial sums (see ``_KernelShader._accumulate``; powers of two)
SUM_LEVELS = (16, 16, 16)
#: a rounding scan's blocks (see ``_ScanShader._subblocked_pass``; a power of two)
SUM_BLOCK = 64
#: operations on two floats that shader compilers rewrite when the operands share a value
_SHARING_OPS = frozenset({"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"})
#: float sums and products of at most this many elements hide each element behind an opaque
#: zero: the shader compiler unrolls such loops, and x + y + (-x) then meets its own operand
_UNROLLED = 256
#: how many operations deep two operands are searched for a shared value (Mesa's patterns
#: are at most a few operations deep)
_REACH = 3
_FLOAT_LITERAL = re.compile(r"-?[0-9][0-9.e+-]*f|bitcast<f32>\(0x[0-9a-f]+u\)")
_LET = re.compile(r"\s*let (\w+) = (.*);$")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def schedule(lines: list[str]) -> list[str]:
    """``lines`` with each run of consecutive ``let`` statements in dependency levels: a
    statement comes after those it uses, as early as they allow (ties keep their order), so
    independent computations (say, three math functions written out in one kernel) are
    interleaved. Any other line (a store, a loop, a brace) ends a run and stays in place.

    Why: llvmpipe, the CPU driver CI runs, runs a shader in about the order written, each
    invocation's dependency chain setting its cost; interleaved, the CPU's out-of-order
    window overlaps the independent chains (the benchmark chain: 1.19x -> 1.09x the
    hand-written kernel, same run). A GPU's compiler schedules for itself."""
    out: list[str] = []
    run: list[tuple[int, int, str]] = []  # (level, position, line)
    level: dict[str, int] = {}

    def flush() -> None:
        out.extend(line for _, _, line in sorted(run))
        run.clear()
        level.clear()

    for line in lines:
        m = _LET.fullmatch(line)
        if m is None:
            flush()
            out.append(line)
            continue
        name, rhs = m.groups()
        lv = 1 + max((level.get(w, -1) for w in _IDENT.findall(rhs)), default=-1)
        level[name] = lv
        run.append((lv, len(run), line))
    flush()
    return out


def _workgroup_text(slots: _Slots, src: _Source, shared: list[str], size: int,
                    head: list[str], guard: str | None, body: list[str]) -> str:
    """The text of a shader whose workgroups (``size`` invocations, ``lid``; ``wid``/``nwg``:
    the workgroup's index and the grid) cooperate through workgroup memory (``shared``
    declarations). Barriers need uniform control flow, so the guard of a cond's branch is
    made uniform through workgroup memory (``fg_run``) after ``head``."""
    if guard is not None:
        head = [*head, "  if (lid == 0u) {", f"    fg_run = select(0u, 1u, {guard});", "  }",
                "  if (workgroupUniformLoad(&fg_run) == 0u) { return; }"]
    return "\n".join([
        *slots.declarations(), "", src.prelude(), "", *shared,
        *(["var<workgroup> fg_run: u32;"] if guard is not None else []), "",
        f"@compute @workgroup_size({size})",
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, "
        "@builtin(local_invocation_index) lid: u32) {", *head, *body, "}", ""])


def render_kernel(kern: Kernel, place: dict[int, tuple[str, int | str]],
                  fused_fma: bool = True, scope: Scope = TOP, tree: Tree | None = None,
                  scatter: Scatter | None = None) -> Shader:
    """The shader of ``kern``; ``place`` maps a buffer id to (slot key, word offset: an int,
    or an i32 expression in the loop counters of ``scope``). ``fused_fma``: the adapter's fma
    rounds once (else math functions compute it in software: their error-free
    transformations need a fused one). ``tree``: compute the top-level reductions with
    workgroup trees (this shader is one of the passes :class:`Tree` describes).
    ``scatter``: run a scatter kernel's iterations in parallel (:class:`Scatter`)."""
    return _KernelShader(kern, place, fused_fma, scope, tree, scatter).source()


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


def render_counter(d: int, value: str, place, scope: Scope = TOP) -> Shader:
    """A one-invocation shader setting loop counter ``d`` (word ``d`` of ``ctl``) to the
    i32 expression ``value`` (of ``it<d>`` and the outer counters), under ``scope``'s
    guards."""
    slots = _Slots(place)
    head, guard = slots.scope_lines(Scope(max(scope.loops, d + 1), scope.guards))
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    head.append(f"  {slots.word('ctl', 0, f'{d}i', write=True)} = bitcast<u32>({value});")
    text = "\n".join([*slots.declarations(), "", "@compute @workgroup_size(1)",
                      "fn main() {", *head, "}", ""])
    return Shader(f"counter{d}", text, slots.bindings(), (1, 1, 1))


def render_copy(dst: tuple[str, int | str], src: tuple[str, int | str], words: int,
                scope: Scope = TOP) -> Shader:
    """``words`` words from ``src`` to ``dst`` (slot key, offset), e.g. a while loop's final
    carry from its spare buffer home (WebGPU cannot copy a buffer onto itself)."""
    return _word_shader("copy", dst, words, scope, lambda slots: slots.word(*src, "flat"))


def render_fill(dst: tuple[str, int | str], words: int, scope: Scope = TOP) -> Shader:
    """``words`` zero words at ``dst`` (slot key, offset)."""
    return _word_shader("fill", dst, words, scope, lambda slots: "0u")


def _word_shader(name: str, dst, words: int, scope: Scope, value) -> Shader:
    """One invocation per word ``flat`` of ``dst``, storing ``value(slots)``."""
    slots = _Slots({})
    head, guard = slots.scope_lines(scope)
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    head += ["  let flat = i32(gid.x + gid.y * nwg.x * "
             f"{WORKGROUP}u);", f"  if (flat >= {words}i) {{ return; }}",
             f"  {slots.word(*dst, 'flat', write=True)} = {value(slots)};"]
    text = "\n".join([*slots.declarations(), "", f"@compute @workgroup_size({WORKGROUP})",
                      "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
                      "@builtin(num_workgroups) nwg: vec3<u32>) {", *head, "}", ""])
    return Shader(name, text, slots.bindings(), grid_1d(words, WORKGROUP))


# -- matmul ----------------------------------------------------------------------------------------

TILE = 64     # output tile edge per workgroup
#: contraction elements a thread accumulates before adding them to a middle sum, whose
#: GEMM_BLOCK values go into its totals (a multiple of KSTEP): a long k is a blocked sum,
#: not one running fma chain (a matvec over k = 60000 was 25 ulps off float64)
GEMM_BLOCK = 64
THREADS = 16  # threads per tile edge: each computes 4 x 4 outputs
KSTEP = 16


def _gemm_epilogue(step: Gemm, slots: _Slots, acc: str, at: str) -> str:
    """``alpha * acc + beta * c0[at]`` (the planner folds an SGD update into a gemm as
    ``c = alpha * a @ b + beta * c0``), as f32 text."""
    alpha, beta, c0 = step.alpha, step.beta, step.c0 or step.c
    result = acc if alpha == 1.0 else f"{literal(alpha, np.float32)} * {acc}"
    if beta:
        old = f"bitcast<f32>({slots.ref(c0, at)})"
        scaled = old if beta == 1.0 else f"{literal(beta, np.float32)} * {old}"
        result = f"{result} + {scaled}"
    return result


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


def render_gemm(step: Gemm, place: dict[int, tuple[str, int | str]],
                scope: Scope = TOP, split: SplitK | None = None) -> Shader:
    """``c = a @ b`` per batch matrix: 64x64 output tiles through workgroup memory, 4x4
    outputs per thread (rows ``ty + 16 i``, columns ``tx + 16 j``: coalesced reads/writes).
    ``split``: this is the first pass of a split contraction (:class:`SplitK`): workgroup
    ``z`` computes range ``z / batch`` of batch matrix ``z % batch``."""
    if step.c.dtype != np.float32:
        raise LoweringError(f"jit(backend='gpu'): matmul of {step.c.dtype.name}")
    slots = _Slots(place)
    head, guard = slots.scope_lines(scope)
    if guard is not None:  # uniform for the barriers: through workgroup memory
        head += ["  if (lid.x == 0u && lid.y == 0u) {",
                 f"    run = select(0u, 1u, {guard});", "  }",
                 "  if (workgroupUniformLoad(&run) == 0u) { return; }"]
    m, n, k = step.m, step.n, step.k
    ia = f"gp * {m}i + gi" if step.trans_a else f"gi * {k}i + gp"
    ib = f"gc * {k}i + gq" if step.trans_b else f"gq * {n}i + gc"
    a_ref = slots.ref(step.a, f"abase + {ia}")
    b_ref = slots.ref(step.b, f"bbase + {ib}")
    if split is None:
        c_ref = slots.ref(step.c, f"cbase + r * {n}i + c", write=True)
        result = _gemm_epilogue(step, slots, "tot[{i}]", f"cbase + r * {n}i + c")
        batch_of, kbeg, kend, size = "i32(wid.z)", "0i", f"{k}i", k
    else:
        c_ref = slots.word("arena", split.base, f"i32(wid.z) * {m * n}i + r * {n}i + c", True)
        result = "tot[{i}]"
        batch_of = f"i32(wid.z) % {step.batch}i"
        kbeg = f"(i32(wid.z) / {step.batch}i) * {split.size}i"
        kend = f"min({kbeg} + {split.size}i, {k}i)"
        size = split.size
    per = TILE * KSTEP // (THREADS * THREADS)

    def flush(indent: str, low: str = "acc", high: str = "mid") -> list[str]:
        """A thread's ``low`` sums into its ``high`` ones (blocked sums: bounded error)."""
        return [f"{indent}{high}[{i}] = {high}[{i}] + {low}[{i}]; {low}[{i}] = 0.0f;"
                for i in range(16)]
    fma = []
    for i in range(4):
        fma.append(f"      let a{i} = ta[(ty + {16 * i}i) * {KSTEP}i + kk];")
    for j in range(4):
        fma.append(f"      let c{j} = tb[kk * {TILE}i + tx + {16 * j}i];")
    for i in range(4):
        for j in range(4):
            fma.append(f"      acc[{4 * i + j}] = fma(a{i}, c{j}, acc[{4 * i + j}]);")
    stores = []
    for i in range(4):
        for j in range(4):
            stores += [f"  {{ let r = row0 + ty + {16 * i}i; let c = col0 + tx + {16 * j}i;",
                       f"    if (r < {m}i && c < {n}i) {{ {c_ref} = "
                       f"bitcast<u32>({result.format(i=4 * i + j)}); }} }}"]
    text = "\n".join([
        *slots.declarations(), "",
        f"var<workgroup> ta: array<f32, {TILE * KSTEP}>;",
        f"var<workgroup> tb: array<f32, {TILE * KSTEP}>;",
        *(["var<workgroup> run: u32;"] if guard is not None else []), "",
        f"@compute @workgroup_size({THREADS}, {THREADS})",
        "fn main(@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(workgroup_id) wid: vec3<u32>) {",
        *head,
        "  let tx = i32(lid.x); let ty = i32(lid.y);",
        f"  let row0 = i32(wid.y) * {TILE}i; let col0 = i32(wid.x) * {TILE}i;",
        f"  let bt = {batch_of};",
        f"  let abase = bt * {m * k}i; let bbase = bt * {k * n}i; let cbase = bt * {m * n}i;",
        f"  let kbeg = {kbeg}; let kend = {kend};",
        "  var acc: array<f32, 16>;",
        "  var mid: array<f32, 16>;",
        "  var tot: array<f32, 16>;",
        "  let t = ty * 16i + tx;",
        f"  for (var p0: i32 = kbeg; p0 < kend; p0 += {KSTEP}i) {{",
        f"    for (var q: i32 = 0i; q < {per}i; q++) {{",
        f"      let e = t + q * {THREADS * THREADS}i;",
        f"      let gi = row0 + e / {KSTEP}i; let gp = p0 + e % {KSTEP}i;",
        "      var va = 0.0f;",
        f"      if (gi < {m}i && gp < kend) {{ va = bitcast<f32>({a_ref}); }}",
        "      ta[e] = va;",
        f"      let gq = p0 + e / {TILE}i; let gc = col0 + e % {TILE}i;",
        "      var vb = 0.0f;",
        f"      if (gq < kend && gc < {n}i) {{ vb = bitcast<f32>({b_ref}); }}",
        "      tb[e] = vb;",
        "    }",
        "    workgroupBarrier();",
        f"    for (var kk: i32 = 0i; kk < {KSTEP}i; kk++) {{",
        *fma,
        "    }",
        "    workgroupBarrier();",
        f"    if ((p0 - kbeg) % {GEMM_BLOCK}i == {GEMM_BLOCK - KSTEP}i) {{",
        *flush("      "),
        f"      if ((p0 - kbeg) % {GEMM_BLOCK ** 2}i == {GEMM_BLOCK ** 2 - KSTEP}i) {{",
        *flush("        ", "mid", "tot"),
        "      }",
        "    }",
        "  }",
        *flush("  "), *flush("  ", "mid", "tot"),
        *stores,
        "}", ""])
    gx, gy = -(-n // TILE), -(-m // TILE)
    gz = step.batch * (split.chunks if split else 1)
    if max(gx, gy, gz) > MAX_GROUPS:
        raise LoweringError(f"jit(backend='gpu'): matmul {m}x{k}x{n} (batch {step.batch}) "
                            f"needs more than {MAX_GROUPS} workgroups along one axis")
    grid = (gx, gy, gz) if m and n else (0, 1, 1)
    name = f"{step.name}_split" if split else step.name
    return Shader(name, text, slots.bindings(), grid, -(-size // KSTEP) * (1 + per + KSTEP))


def render_gemm_sum(step: Gemm, place, scope: Scope, split: SplitK) -> Shader:
    """The second pass of a split contraction (:class:`SplitK`): one invocation per output
    element adds its ranges' partial products in order, then applies alpha and beta."""
    slots, src = _Slots(place), _Source(False)
    outputs = step.batch * step.m * step.n
    part = slots.word("arena", split.base, f"q * {outputs}i + flat")
    body = ["  var acc = 0.0f;",
            f"  for (var q = 0i; q < {split.chunks}i; q++) {{ acc += bitcast<f32>({part}); }}",
            f"  {slots.ref(step.c, 'flat', write=True)} = "
            f"bitcast<u32>({_gemm_epilogue(step, slots, 'acc', 'flat')});"]
    return _flat_shader(f"{step.name}_sum", slots, src, scope, outputs, body, split.chunks)


# -- cumulative scans ------------------------------------------------------------------------------

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


class _ScanShader(_KernelShader):
    """Writes the passes of a scan (:func:`render_scan`). The scan loop ``s`` is the only
    loop inside the invocation: nodes depending on it are written into its body
    (``lines[s]``), the other loops' indices come from the invocation's line."""

    def __init__(self, kern: Kernel, scan: ScanInfo, place, fused_fma: bool, scope: Scope,
                 blocks: int, base: int):
        super().__init__(kern, place, fused_fma, scope)
        self.scan, self.blocks, self.base = scan, blocks, base
        s = scan.var
        self.length = s.extent + 1
        self.block = -(-self.length // blocks)
        self.others = [v for v in kern.loops if v is not s]
        self.rows = math.prod(v.extent for v in self.others)
        for v in self.others:
            self.chain[v] = ()
        self.chain[s] = (s,)
        self.lines[s] = []
        self.trips[s] = self.block
        self.carried: frozenset = frozenset()  # ids of the nodes bound to loop-carried names
        self.uses: dict[tuple[int, frozenset], bool] = {}

    def scope(self, e: Expr) -> Var | None:
        """The loop ``e`` is evaluated in; the scan loop for a node reading a value bound to
        a loop-carried name (a combine's ``prev`` and ``elem`` as ``acc``, ``mid``, ``tv``):
        by its free variables alone, a combine of an element that does not vary along the
        scan (a broadcast, ``stack([x, x])``) placed its hidden copy of ``acc`` at the top,
        where ``acc`` is not defined, and any node of that element alone would have been
        cached there and reused by the next combine, whose ``elem`` is another value."""
        if self.carried and self._uses_carried(e):
            return self.scan.var
        return super().scope(e)

    def _uses_carried(self, e: Expr) -> bool:
        key = (id(e), self.carried)
        got = self.uses.get(key)
        if got is None:
            got = id(e) in self.carried or any(self._uses_carried(a) for a in e.args)
            self.uses[key] = got
        return got

    def _at(self, e: Expr) -> tuple[list[str], str]:
        """(lines, name) computing ``e`` in a block of its own: the names defined there are
        forgotten afterwards, so later uses recompute them in their own blocks."""
        s = self.scan.var
        self.lines[s] = []
        name = self.value(e)
        lines, self.lines[s] = self.lines[s], []
        local = {w.split()[1].rstrip(":") for w in lines if w.split()[0] in ("let", "var")}
        self.names = {k: v for k, v in self.names.items() if v not in local}
        return lines, name

    def _word(self, at: str, write: bool = False) -> str:
        return self.slots.word("arena", self.base, at, write)

    def shader(self, kind: str) -> Shader:
        """One pass: ``"totals"`` (each block but the last folds its elements), ``"prefix"``
        (each line turns its block totals into exclusive prefixes, in place) or ``"scan"``
        (each block folds its elements from its prefix and stores every result)."""
        dt, blocks = self.kern.stores[0].buffer.dtype, self.blocks
        per_row = {"totals": blocks - 1, "prefix": 1, "scan": blocks}[kind]
        head = [f"  let row = flat / {per_row}i;", f"  let blk = flat % {per_row}i;"]
        stride = self.rows
        for v in self.others:
            stride //= v.extent
            q = "row" if stride == 1 else f"(row / {stride}i)"
            head.append(f"  let v{v.id} = {q} % {v.extent}i;")
        if kind == "prefix":
            body, iterations = self._prefix_pass(dt), blocks
        elif not self._subblocked():
            body, iterations = self._exact_pass(kind, dt), self.block + self.iterations
        else:
            body, iterations = self._subblocked_pass(kind, dt), self.block + self.iterations
        name = {"totals": f"{self.kern.name}_totals", "prefix": f"{self.kern.name}_prefix",
                "scan": self.kern.name}[kind]
        return _flat_shader(name, self.slots, self.src, self.scope_of, self.rows * per_row,
                            [*head, *self.lines[None], *body], iterations)

    def _combine(self, prev: str, elem: str) -> tuple[list[str], str]:
        """(lines, result) of the scan's combine of the values named ``prev`` and ``elem``."""
        scan = self.scan
        self.names[id(scan.prev)], self.names[id(scan.elem)] = prev, elem
        self.carried = frozenset({id(scan.prev), id(scan.elem)})
        got = self._at(self.kern.stores[0].value)
        self.carried = frozenset()
        del self.names[id(scan.prev)], self.names[id(scan.elem)]
        return got

    def _subblocked(self) -> bool:
        """Does the combine round (a float sum, product, logsumexp: not max/min), so that
        a long serial fold must be split to keep its error bounded?"""
        root = self.kern.stores[0].value
        return wgsl_type(root.dtype) == "f32" and root.op not in ("max", "min")

    def _total(self, b: str) -> str:
        return f"row * {self.blocks}i + {b}"

    def _prefix_pass(self, dt) -> list[str]:
        """Each line's block totals into exclusive prefixes, in place. A rounding combine
        folds them in two levels (groups of ``SUM_BLOCK`` totals, then the groups' totals),
        so the prefixes of many blocks stay within a few roundings."""
        word = lambda b, w=False: self._word(self._total(b), w)  # noqa: E731
        if not self._subblocked():
            combine, r = self._combine("acc", "tv")
            return [f"  var acc = {_from_word(word('0i'), dt)};",
                    f"  for (var b = 1i; b < {self.blocks}i; b++) {{",
                    f"    let tv = {_from_word(word('b'), dt)};",
                    f"    {word('b', True)} = {_to_word('acc', dt)};",
                    *combine, f"    acc = {r};", "  }"]
        hi_lo, hl = self._combine("hi", "lo")
        lo_tv, lt = self._combine("lo", "tv")
        t = wgsl_type(dt)
        return [f"  var lo = {_from_word(word('0i'), dt)};", f"  var hi: {t};",
                "  var has_hi = false;", "  var lo_fresh = false;",
                f"  for (var b = 1i; b < {self.blocks}i; b++) {{",
                f"    let tv = {_from_word(word('b'), dt)};", *hi_lo,
                f"    let pre = select(select(lo, {hl}, has_hi), hi, lo_fresh);",
                f"    {word('b', True)} = {_to_word('pre', dt)};",
                f"    if (b % {SUM_BLOCK}i == 0i) {{", "      hi = pre;", "      has_hi = true;",
                "      lo_fresh = true;", "    }", *lo_tv,
                f"    lo = select({lt}, tv, lo_fresh);", "    lo_fresh = false;", "  }"]

    def _start(self, first: list[str], p0: str, prefix: str | None) -> list[str]:
        """Lines starting a block: block 0 from the line's first element (stored by an
        earlier kernel), the others from their prefix (``prefix``: its lines)."""
        s = self.scan.var
        t = wgsl_type(self.kern.stores[0].buffer.dtype)
        lines = [f"  var acc: {t};", f"  let k0 = blk * {self.block}i;",
                 f"  let k1 = min(k0 + {self.block}i, {self.length}i);", "  var k = k0;",
                 "  var fresh = true;", "  if (blk == 0i) {", f"    let v{s.id} = 0i;", *first,
                 f"    acc = {p0};", "    fresh = false;", "    k = 1i;", "  }"]
        if prefix is not None:
            lines[-1] = f"  }} else {{ {prefix} }}"
        return lines

    def _exact_pass(self, kind: str, dt) -> list[str]:
        """Totals or scan of a combine that does not round (max/min, integers, bools): one
        running value per block, from its prefix."""
        st, scan, s = self.kern.stores[0], self.scan, self.scan.var
        first, p0 = self._at(scan.prev)
        self.names[id(scan.prev)] = "acc"
        self.lines[s] = []
        r, c = self.value(st.value), self.value(scan.elem)
        prefix = None
        if kind == "scan" and self.blocks > 1:
            prefix = f"acc = {_from_word(self._word(self._total('blk')), dt)}; fresh = false;"
        body = self._start(first, p0, prefix)
        update = [f"    acc = select({r}, {c}, fresh);", "    fresh = false;"]
        if kind == "scan":
            update.append(f"    {self.slots.ref(st.buffer, self.value(st.index), write=True)}"
                          f" = {_to_word('acc', dt)};")
        body += ["  for (; k < k1; k++) {", f"    let v{s.id} = k - 1i;", *self.lines[s],
                 *update, "  }"]
        if kind == "totals":
            body.append(f"  {self._word(self._total('blk'), True)} = {_to_word('acc', dt)};")
        return body

    def _subblocked_pass(self, kind: str, dt) -> list[str]:
        """Totals or scan of a rounding combine, in two levels: each ``SUM_BLOCK`` elements
        fold into a local value from scratch (``acc``), ``SUM_BLOCK`` local values into
        ``mid``, and those into ``pre`` (which starts as the block's prefix); an element's
        result is ``pm`` (``pre`` combined with ``mid``) combined with ``acc``, so every result
        is a few roundings from exact (the serial fold's error grew with the length: 3e7
        ones summed to 16777216 and stayed there)."""
        st, scan, s = self.kern.stores[0], self.scan, self.scan.var
        t = wgsl_type(dt)
        first, p0 = self._at(scan.prev)
        with_pm, pa = self._combine("pm", "acc")
        with_mid, ma = self._combine("mid", "acc")
        with_pre, pmid = self._combine("pre", "mid")
        self.names[id(scan.prev)] = "acc"
        self.lines[s] = []
        # the element behind an opaque zero: once the compiler unrolls a short line, an
        # element may be a constant (cumprod of [x, 0] gave 0 for NaN)
        c = self._opaque(self.value(scan.elem), scan.elem)
        self.names[id(scan.elem)] = c
        r = self.value(st.value)
        prefix = None
        if kind == "scan" and self.blocks > 1:
            prefix = (f"pre = {_from_word(self._word(self._total('blk')), dt)}; "
                      "has_pre = true; pm = pre; has_pm = true;")
        body = [f"  var {v}: {t};" for v in ("pre", "mid", "pm")]
        body += [f"  var has_{v} = false;" for v in ("pre", "mid", "pm")]
        body += [*self._start(first, p0, prefix),
                 "  var last = acc;"]  # (block 0 may hold the first element only)
        update = [f"    acc = select({r}, {c}, fresh);", "    fresh = false;", *with_pm,
                  f"    last = select(acc, {pa}, has_pm);"]
        if kind == "scan":
            update.append(f"    {self.slots.ref(st.buffer, self.value(st.index), write=True)}"
                          f" = {_to_word('last', dt)};")
        b = SUM_BLOCK
        update += ["    let count = k - k0 + 1i;", f"    if (count % {b}i == 0i) {{", *with_mid,
                   f"      mid = select(acc, {ma}, has_mid);", "      has_mid = true;",
                   "      fresh = true;", *with_pre, f"      pm = select(mid, {pmid}, has_pre);",
                   "      has_pm = true;", f"      if (count % {b * b}i == 0i) {{",
                   "        pre = pm;", "        has_pre = true;", "        has_mid = false;",
                   "      }", "    }"]
        body += ["  for (; k < k1; k++) {", f"    let v{s.id} = k - 1i;", *self.lines[s],
                 *update, "  }"]
        if kind == "totals":
            body.append(f"  {self._word(self._total('blk'), True)} = {_to_word('last', dt)};")
        return body


def render_scan(kern: Kernel, scan: ScanInfo, place, fused_fma: bool = True,
                scope: Scope = TOP, blocks: int = 1, base: int = 0) -> list[Shader]:
    """The dispatches of a scan (:func:`scan_of`) whose lines (the other loops) are split
    into ``blocks`` blocks of consecutive elements. One block: one invocation per line runs
    the line in order (one dispatch). More (a line longer than an invocation may loop, or
    too few lines to fill the device): reduce, scan the totals, scan again: ``totals`` has
    an invocation per line and block (the last excepted) fold the block into the arena at
    word ``base`` (``rows * blocks`` words), ``prefix`` has an invocation per line turn its
    totals into exclusive prefixes, and ``scan`` has an invocation per line and block fold
    its block again, starting from its prefix, storing each result. No barriers (llvmpipe
    runs a workgroup's barriers as coroutine switches: slow); 3 dispatches, reading the
    operand twice. The combine is reassociated, so float sums and products may round
    differently from the serial loop (max/min and integer results are exact)."""
    def make(kind: str) -> Shader:
        return _ScanShader(kern, scan, place, fused_fma, scope, blocks, base).shader(kind)
    if blocks == 1:
        return [make("scan")]
    return [make("totals"), make("prefix"), make("scan")]


# -- sort ------------------------------------------------------------------------------------------

def _sort_key(value: str, dtype, order: str) -> str:
    """An i32 whose signed order is the sort order of ``value`` (sort_step.py's orders):
    ``"sort"`` merges -0.0 with 0.0 and puts every NaN last; ``"top_k"`` is the total order
    on the bits, reversed (descending)."""
    t = wgsl_type(dtype)
    if t == "f32":
        bits = f"bitcast<i32>({value})"
        if order == "sort":
            bits = (f"select(select({bits}, 0i, {value} == 0.0f), 2147483647i, "
                    f"fg_isnan({value}))")
        key = f"select({bits}, {bits} ^ 2147483647i, {bits} < 0i)"
    elif t == "u32":
        key = f"bitcast<i32>({value} ^ 0x80000000u)"
    elif t == "bool":
        key = f"select(0i, 1i, {value})"
    else:
        key = value
    return f"(~{key})" if order == "top_k" else key


def _sort_keys(step, slots: _Slots, src: _Source, row: str, pos: str, name: str,
               indent: str = "    ") -> list[str]:
    """Lines binding ``<name><m>`` to the ``m``-th sort key of the element at position
    ``pos`` of the row starting at word ``row`` (a line of a sort lies ``inner`` apart)."""
    inner = math.prod(step.shape[step.dimension + 1:])
    out = []
    for m in range(step.num_keys):
        buf = step.inputs[m]
        if buf.dtype == np.float32:
            src.need("isnan")
        v = _from_word(slots.ref(buf, f"{row} + {pos} * {inner}i"), buf.dtype)
        out.append(f"{indent}let {name}{m} = {_sort_key(v, buf.dtype, step.order)};")
    return out


def _sort_gather(step, slots: _Slots, o: str, q: str, rank: str, pos: str) -> list[str]:
    """Lines writing the element at position ``pos`` of row (``o``, ``q``) to sorted position
    ``rank``: every operand, and the position itself for top_k."""
    n, inner = step.shape[step.dimension], math.prod(step.shape[step.dimension + 1:])
    lines = [f"  let at = ({o} * {step.k}i + {rank}) * {inner}i + {q};",
             f"  let src_at = {o} * {n * inner}i + {pos} * {inner}i + {q};"]
    for src_buf, dst in zip(step.inputs, step.outputs):
        lines.append(f"  {slots.ref(dst, 'at', write=True)} = {slots.ref(src_buf, 'src_at')};")
    if step.index_output is not None:
        lines.append(f"  {slots.ref(step.index_output, 'at', write=True)} = "
                     f"bitcast<u32>({pos});")
    return lines


def _flat_shader(name: str, slots: _Slots, src: _Source, scope: Scope, invocations: int,
                 body: list[str], iterations: int = 0) -> Shader:
    """A shader of ``invocations`` invocations (``flat``) running ``body`` under ``scope``."""
    head, guard = slots.scope_lines(scope)
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    lines = [*head, f"  let flat = i32(gid.x + gid.y * nwg.x * {WORKGROUP}u);",
             f"  if (flat >= {invocations}i) {{ return; }}", *body]
    text = "\n".join([*slots.declarations(), "", src.prelude(), "",
                      f"@compute @workgroup_size({WORKGROUP})",
                      "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
                      "@builtin(num_workgroups) nwg: vec3<u32>) {", *lines, "}", ""])
    grid = grid_1d(invocations, WORKGROUP) if invocations else (0, 1, 1)
    return Shader(name, text, slots.bindings(), grid, iterations)


def render_sort(step, place, scope: Scope = TOP) -> Shader:
    """A stable sort (``sort_step.SortStep``) by ranks: one invocation per element counts the
    elements of its row that sort before it (smaller keys, or equal keys at smaller
    positions) and writes every operand there. O(n) per element: for short rows (long ones
    take :func:`render_bitonic`)."""
    slots, src = _Slots(place), _Source(False)
    shape, d = step.shape, step.dimension
    n = shape[d]
    inner = math.prod(shape[d + 1:])
    lines = [f"  let q = flat % {inner}i;", f"  let i = (flat / {inner}i) % {n}i;",
             f"  let o = flat / {inner * n}i;", f"  let base = o * {n * inner}i + q;",
             "  var rank = 0i;",
             f"  for (var j = 0i; j < {n}i; j++) {{",
             "    var before = false;", "    var decided = false;",
             *_sort_keys(step, slots, src, "base", "i", "ki"),
             *_sort_keys(step, slots, src, "base", "j", "kj")]
    for m in range(step.num_keys):
        lines += [f"    if (!decided && kj{m} != ki{m}) {{ before = kj{m} < ki{m}; "
                  "decided = true; }"]
    lines += ["    if (!decided) { before = j < i; }",
              "    rank += select(0i, 1i, before);", "  }",
              f"  if (rank >= {step.k}i) {{ return; }}",
              *_sort_gather(step, slots, "o", "q", "rank", "i")]
    total = math.prod(shape) if step.k else 0
    return _flat_shader(step.name, slots, src, scope, total, lines, iterations=n)


def bitonic_width(step) -> int:
    """The power of two a bitonic sort pads the rows of ``step`` to."""
    return 1 << max(0, step.shape[step.dimension] - 1).bit_length()


SORT_TILE = 512  # positions a workgroup sorts in its memory (TILE / 2 invocations)


def bitonic_stages(width: int) -> list[tuple[str, int]]:
    """The dispatches of a bitonic sort of rows of ``width`` (a power of two): ``("tile",
    0)`` sorts every tile of ``SORT_TILE`` positions (all blocks up to a tile), then for each
    larger block ``("global", jj)`` compare-exchanges at each distance ``jj`` >= a tile, and
    ``("local", 0)`` the distances within a tile."""
    tile = min(width, SORT_TILE)
    out = [("tile", 0)]
    kk = 2 * tile
    while kk <= width:
        jj = kk // 2
        while jj >= tile:
            out.append(("global", jj))
            jj //= 2
        out.append(("local", 0))
        kk *= 2
    return out


def render_bitonic(step, place, scope: Scope, base: int, ctl: int) -> list[Shader]:
    """A stable sort (``sort_step.SortStep``) of long rows by a bitonic network on positions
    (``O(n log^2 n)`` work; rows padded to a power of two, the padding ordered last; the
    dispatches are :func:`bitonic_stages`). Each row's positions live in the arena at word
    ``base`` (``bitonic_width`` words per row); two elements compare by their keys, then by
    position, a total order, so the network's result is the stable sort. Distances within a
    tile of ``SORT_TILE`` positions are done by one workgroup in its memory, one dispatch for
    all of them; larger ones take a dispatch each (one invocation per pair). The block size
    and distance of a dispatch are two ``ctl`` words (``ctl``, ``ctl + 1`` or ``ctl + 2``,
    ``ctl + 3``): its first invocation writes the next dispatch's to the other pair, so one
    shader per kind and parity serves every stage. The last dispatch gathers the operands."""
    shape, d = step.shape, step.dimension
    n, inner = shape[d], math.prod(shape[d + 1:])
    rows = math.prod(shape) // n
    width = bitonic_width(step)
    tile = min(width, SORT_TILE)
    src = _Source(False)

    def ctl_word(slots, w: int, write: bool = False) -> str:
        return slots.word("ctl", 0, f"{ctl + w}i", write)

    def idx(slots, at: str, write: bool = False) -> str:
        return slots.word("arena", base, at, write)

    def compare(slots) -> list[str]:
        """``swap``: does position ``y`` come before ``x`` (keys, then position)?"""
        lines = ["  var swap = y < x;", f"  if (x < {n}i && y < {n}i) {{",
                 *_sort_keys(step, slots, src, "rowbase", "x", "kx"),
                 *_sort_keys(step, slots, src, "rowbase", "y", "ky"),
                 "    var decided = false;"]
        lines += [f"    if (!decided && kx{m} != ky{m}) {{ swap = ky{m} < kx{m}; "
                  "decided = true; }" for m in range(step.num_keys)]
        return lines + ["  }"]

    def exchange(slots, i: str, jj: str, kk: str, load, store, pos: str) -> list[str]:
        """Compare-exchange places ``i`` and ``i + jj``: ascending where bit ``kk`` of the
        row position ``pos`` (of place ``i``) is clear, descending elsewhere."""
        return [f"  let a = {load(i)};", f"  let b = {load(f'{i} + {jj}')};",
                f"  let up = ({pos} & {kk}) == 0i;",
                "  let x = select(b, a, up);", "  let y = select(a, b, up);", *compare(slots),
                "  if (swap) {", f"  {store(i, 'b')}", f"  {store(f'{i} + {jj}', 'a')}", "  }"]

    def next_params(slots, w: int, kk: str, jj: str, first: str) -> list[str]:
        return [f"  if ({first}) {{", f"    {ctl_word(slots, w, True)} = bitcast<u32>({kk});",
                f"    {ctl_word(slots, w + 1, True)} = bitcast<u32>({jj});", "  }"]

    def global_stage(parity: int) -> Shader:
        slots = _Slots(place)
        r, w = 2 * parity, 2 - 2 * parity
        body = [f"  let kk = bitcast<i32>({ctl_word(slots, r)});",
                f"  let jj = bitcast<i32>({ctl_word(slots, r + 1)});",
                *next_params(slots, w, "kk", "jj / 2i", "flat == 0i"),
                f"  let row = flat / {width // 2}i;", f"  let p = flat % {width // 2}i;",
                "  let i = (p / jj) * 2i * jj + p % jj;",
                f"  let rowbase = (row / {inner}i) * {n * inner}i + row % {inner}i;",
                *exchange(slots, "i", "jj", "kk",
                          lambda at: f"bitcast<i32>({idx(slots, f'row * {width}i + {at}')})",
                          lambda at, v: f"  {idx(slots, f'row * {width}i + {at}', True)} = "
                                        f"bitcast<u32>({v});", "i")]
        return _flat_shader(f"{step.name}_stage", slots, src, scope, rows * (width // 2), body)

    def tile_stage(kind: str, parity: int) -> Shader:
        slots = _Slots(place)
        head, guard = slots.scope_lines(scope)
        per_row = width // tile
        head += ["  let wg = i32(wid.x + wid.y * nwg.x);", f"  let row = wg / {per_row}i;",
                 f"  let t0 = (wg % {per_row}i) * {tile}i;",
                 f"  if (row >= {rows}i) {{ return; }}"]
        half = tile // 2
        body = [f"  let rowbase = (row / {inner}i) * {n * inner}i + row % {inner}i;",
                f"  let at = row * {width}i + t0;"]
        if kind == "tile":  # the positions start as 0 .. width - 1
            body += ["  fg_sp[lid] = t0 + i32(lid);",
                     f"  fg_sp[lid + {half}u] = t0 + i32(lid) + {half}i;"]
            body += next_params(slots, 0, f"{2 * tile}i", f"{tile}i", "wg == 0i && lid == 0u")
            loops = [f"  for (var kk = 2i; kk <= {tile}i; kk *= 2i) {{",
                     "  for (var jj = kk / 2i; jj > 0i; jj /= 2i) {"]
        else:
            r, w = 2 * parity, 2 - 2 * parity
            body += [f"  let kk = bitcast<i32>({ctl_word(slots, r)});",
                     *next_params(slots, w, "kk * 2i", "kk", "wg == 0i && lid == 0u"),
                     f"  fg_sp[lid] = bitcast<i32>({idx(slots, 'at + i32(lid)')});",
                     f"  fg_sp[lid + {half}u] = "
                     f"bitcast<i32>({idx(slots, f'at + i32(lid) + {half}i')});"]
            loops = [f"  for (var jj = {half}i; jj > 0i; jj /= 2i) {{"]
        body += ["  workgroupBarrier();", *loops,
                 "  let i = (i32(lid) / jj) * 2i * jj + i32(lid) % jj;", "  let g = t0 + i;",
                 *exchange(slots, "i", "jj", "kk", lambda at: f"fg_sp[{at}]",
                           lambda at, v: f"  fg_sp[{at}] = {v};", "g"),
                 "  workgroupBarrier();", *["  }"] * len(loops)]
        body += [f"  {idx(slots, 'at + i32(lid)', True)} = bitcast<u32>(fg_sp[lid]);",
                 f"  {idx(slots, f'at + i32(lid) + {half}i', True)} = "
                 f"bitcast<u32>(fg_sp[lid + {half}u]);"]
        text = _workgroup_text(slots, src, [f"var<workgroup> fg_sp: array<i32, {tile}>;"],
                               half, head, guard, body)
        levels = tile.bit_length() - 1
        iterations = levels * (levels + 3) // 2 if kind == "tile" else levels
        return Shader(f"{step.name}_{kind}", text, slots.bindings(),
                      grid_1d(rows * per_row, 1), iterations)

    made: dict = {}
    shaders = []
    for t, (kind, _) in enumerate(bitonic_stages(width)):
        parity = (t - 1) % 2  # the tile dispatch writes pair 0, read by dispatch 1
        key = (kind, parity if kind != "tile" else 0)
        if key not in made:
            made[key] = global_stage(parity) if kind == "global" else tile_stage(kind, parity)
        shaders.append(made[key])
    slots = _Slots(place)
    body = [f"  let row = flat / {step.k}i;", f"  let rank = flat % {step.k}i;",
            f"  let pos = bitcast<i32>({idx(slots, f'row * {width}i + rank')});",
            *_sort_gather(step, slots, f"(row / {inner}i)", f"(row % {inner}i)", "rank", "pos")]
    shaders.append(_flat_shader(f"{step.name}_gather", slots, src, scope, rows * step.k, body))
    return shaders
