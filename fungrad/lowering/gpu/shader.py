"""The kernel shader: a fusion :class:`~fungrad.lowering.fusion.Kernel` as one WGSL compute
shader (:func:`render_kernel`).

The GPU twin of ``cpu/kernel.py``: the same kernels (a loop nest of stores of scalar
expressions) become one compute shader each. The rest of the GPU renderer lives beside it:
``types.py`` (the type map, literals, memory words), ``helpers.py`` (helper functions of the
prelude), ``frame.py`` (bindings, scopes, grids, the word shaders), ``schedule.py`` (the
order of ``let`` statements), ``reduce.py`` (workgroup trees, scatter atomics), ``gemm.py``,
``scan.py``, ``sort.py``; ``schemes.py`` holds the analyses and choices between schemes,
``executable.py`` decides where buffers live and runs the shaders.

Parallelism. A parallel kernel runs one invocation per element of its loop nest (flattened,
``KERNEL_WORKGROUP`` to a workgroup; more than 65535 workgroups use a 2-D grid). Its math
functions are written out in its body, in the adapter's style (:func:`kernel_style`): for a
CPU driver (llvmpipe) every rare path is computed and selected and the ``let`` statements are
ordered by dependency level (:func:`~fungrad.lowering.gpu.schedule.schedule`), so that
independent chains interleave; for a GPU rare paths sit behind ``if`` blocks, in order.
Reductions are loops inside the invocation, each node computed at the outermost loop where
its indices are defined, as on the CPU; the GPU planner stores reductions that would
otherwise be recomputed by every invocation of a row. Where outputs are few, a kernel's
reductions can be workgroup trees instead (``schemes.Tree``, ``reduce.py``). A scatter
(``parallel=False``: updates may collide) runs one invocation per update with atomics, the
last update winning an overwrite as in the serial loop (``schemes.Scatter``); a scan
(``schemes.scan_of``) has its own shader (``scan.py``); other serial kernels run their loop
nest in one invocation, in order. Every shader records the loop iterations an invocation may
run (``Shader.loop_iterations``: lavapipe stops them after 65535).

Semantics follow ``cpu/llvm_ops.py`` (JAX's): integer division never traps (``x / 0 = -1``,
``x % 0 = x``) and is done on magnitudes (OpenGL's signed ``/`` and ``%`` are wrong for
negatives); float max/min propagate NaN and order ``-0 < +0`` (WGSL's builtins drop NaN);
NaN is tested on the bits (Vulkan drivers fold ``v != v`` to false); float -> int saturates
and maps NaN to 0; float ``rem`` is C's exact ``fmod`` (WGSL's ``%`` is ``x - y * trunc(x /
y)``, wrong for large quotients). Shader compilers simplify float algebra (x * 0 -> 0, x - x
-> 0, ...), so no float operation gets a literal operand or two operands reaching one value
(:meth:`KernelShader._protect`), which also keeps every constant expression the WGSL
validator rejects (0.0 / 0.0, 1i << 31u, shifts by 32 or more) out of the shaders. Float sums
(reductions, scans, matmul contractions) are blocked, their error bounded.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad.lowering.fusion import Kernel, LoweringError
from fungrad.lowering.gpu.frame import TOP, Scope, Shader, Slots, grid_1d
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.ops import CODE_FOR_OP, MATH_OPS
from fungrad.lowering.gpu.reduce import scatter_store, tree_reduce, tree_source
from fungrad.lowering.gpu.schedule import schedule
from fungrad.lowering.gpu.schemes import Scatter, Tree
from fungrad.lowering.gpu.types import from_word, literal, to_word, wgsl_type
from fungrad.lowering.kernel import INDEX, Expr, Var
from fungrad.lowering.math import wgsl as wgsl_math
from fungrad.lowering.render import KernelRenderer

#: how kernels are written (:func:`kernel_style`): "auto" picks by the adapter, "gpu" or
#: "cpu-driver" force one (the benchmarks compare them on one adapter)
KERNEL_STYLE = "auto"
KERNEL_STYLES = ("gpu", "cpu-driver")


def kernel_style() -> str:
    """The style kernels are written in for the current adapter (``KERNEL_STYLE``):

    - ``"cpu-driver"`` (an adapter whose invocations are CPU threads: llvmpipe/lavapipe,
      WARP): every rare path (sin's large-argument reduction, ...) is computed for every
      element and chosen by selects, since such a driver runs both sides of a branch; the
      ``let`` statements are interleaved (:func:`~fungrad.lowering.gpu.schedule.schedule`),
      since it runs them about in the order written.
    - ``"gpu"`` (a discrete or integrated GPU): rare paths go behind ``if`` blocks, which a
      warp skips unless one of its lanes needs them (``WGSLBuilder.rare``); statements stay
      in the order they are made: the GPU's compiler schedules for itself.

    Both compute the same values (the same algorithm, the same roundings)."""
    style = KERNEL_STYLE
    if style == "auto":
        from fungrad.lowering.gpu import runtime as gpu_runtime

        return "cpu-driver" if gpu_runtime.runtime().cpu_adapter else "gpu"
    if style not in KERNEL_STYLES:
        raise ValueError(f"shader.KERNEL_STYLE is {style!r}; use 'auto' or one of {KERNEL_STYLES}")
    return style


def exact_division() -> bool:
    """Whether kernels divide float32 through ``fg_div_f32`` (helpers.HELPERS), correctly
    rounded as the CPU and JAX divide: the adapter's ``a / b`` is not
    (``Runtime.inexact_division``: NVIDIA's) and its ``fma`` rounds once, as the helper's
    residuals need (an adapter without one keeps its own division)."""
    from fungrad.lowering.gpu import runtime as gpu_runtime

    rt = gpu_runtime.runtime()
    return rt.inexact_division and rt.fused_fma


class _Prelude(Prelude):
    """The prelude of a kernel shader, whose math functions written out inline follow the
    kernel's style (``branches``: rare paths behind ``if`` blocks)."""

    def __init__(self, fused_fma: bool, branches: bool):
        super().__init__(fused_fma, exact_division())
        self.branches = branches

    def inline_math(
        self, name: str, args: list[str], prefix: str, zero: str
    ) -> tuple[list[str], str] | None:
        got = wgsl_math.inline(name, args, prefix, self.fused_fma, zero, self.branches)
        if got is None:
            return None
        lines, result, texts = got
        self._add_math(texts)
        return lines, result


#: invocations per workgroup of a kernel run one invocation per element: llvmpipe has a cost
#: per workgroup, and 256 made the benchmark chain 8% faster there (the hand-written kernel:
#: 11%); the sort and scan shaders measured slower with 256 and keep WORKGROUP
KERNEL_WORKGROUP = 256


class KernelShader(KernelRenderer):
    """Writes one kernel as a shader. What it shares with the LLVM kernel writer (the value
    memo, names, loop scopes, the reduction skeleton, op dispatch through ``code_for_op``)
    is :class:`~fungrad.lowering.render.KernelRenderer`'s."""

    backend = "WGSL"
    code_for_op = CODE_FOR_OP

    def __init__(
        self,
        kern: Kernel,
        place,
        fused_fma: bool,
        scope: Scope,
        tree: Tree | None = None,
        scatter: Scatter | None = None,
        style: str | None = None,
    ):
        super().__init__(kern)
        self.style = style or kernel_style()
        self.tree = tree
        self.tree_at = 0
        self.outputs = math.prod(v.extent for v in kern.loops)
        self.scope_of = scope
        self.slots = Slots(place)
        self.src = _Prelude(fused_fma, self.style == "gpu")
        self.scatter = scatter
        self.serial = not kern.parallel and scatter is None
        if scatter is not None and scatter.mode != "write":
            (st,) = kern.stores
            self.slots.atomic.add(place[st.buffer.id][0] if scatter.mode == "combine" else "arena")
        self.trips: dict[Var | None, int] = {None: 1}  # iterations of each loop's body
        self.iterations = 0
        self.zero = False  # the opaque zero of written-out math functions is defined
        self.zeros = 0  # fresh opaque zeros defined (``fg_z<k>``, see :meth:`_opaque`)
        self.literals: dict[str, str] = {}  # literal -> its opaque name (_opaque_literal)
        self.reach: dict[tuple[int, int], frozenset] = {}

    def let(self, e: Expr, text: str) -> str:
        name = self.tmp()
        self.lines[self.scope(e)].append(f"  let {name} = {text};")
        return name

    # values
    def literal(self, value, dtype) -> str:
        return literal(value, dtype)

    def node(self, e: Expr, args: list[str]) -> str:
        """``e`` of its operands ``args``: a math function written out (:meth:`_inline`), or
        a ``let`` of its expression, its operands protected from the shader compiler's
        algebra (:meth:`_protect`)."""
        args = self._protect(e, args)
        return self._inline(e, args) or self.let(e, self._expression(e, args))

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
            return [
                args[0],
                *(
                    self._opaque(v, a) if self._reaches(a) & cond else v
                    for a, v in zip(e.args[1:], args[1:])
                ),
            ]
        if e.op in ("select", "convert", "bitcast", "load") or not e.args:
            return args
        t = wgsl_type(e.args[0].dtype)
        if t in ("i32", "u32") and all(a.op == "const" for a in e.args):
            # a constant expression WGSL may reject (1i << 31u overflows, 5i / 0i)
            return [self._opaque_literal(args[0], t), *args[1:]]
        if t != "f32":
            return args
        out = [self._opaque_literal(v) if a.op == "const" else v for a, v in zip(e.args, args)]
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
            self.lines[None].append(
                f"  let {name} = {value if t == 'u32' else f'bitcast<{t}>({value})'};"
            )
        return name

    def _opaque(self, value: str, e: Expr) -> str:
        """``value`` (of ``e``) OR-ed with a fresh opaque zero: u (u + 2k + 1) is even."""
        self.zeros += 1
        z = f"fg_z{self.zeros}"
        self.lines[None].append(f"  let {z} = (nwg.x * (nwg.x + {2 * self.zeros + 1}u)) & 1u;")
        name = self.tmp("h")
        self.lines[self.scope(e)].append(
            f"  let {name} = bitcast<f32>(bitcast<u32>({value}) | {z});"
        )
        return name

    def _inline(self, e: Expr, args: list[str]) -> str | None:
        """A float32 math function written out here rather than called (so that
        :func:`schedule` can interleave it with the rest); None for everything else."""
        if e.op not in MATH_OPS or wgsl_type(e.args[0].dtype) != "f32":
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
            return from_word(self.slots.ref(e.attr, a[0]), e.attr.dtype)
        if op == "select":
            return f"select({a[2]}, {a[1]}, {a[0]})"
        if op == "convert":
            return self._convert(e.args[0].dtype, e.dtype, a[0])
        if op == "bitcast":
            return f"bitcast<{wgsl_type(e.dtype)}>({a[0]})"
        return self._op(op, e.args[0].dtype, a)

    def _op(self, op: str, dt, a: list[str]) -> str:
        """The text of kernel op ``op`` on operands ``a`` of dtype ``dt`` (``code_for_op``:
        ``ops.CODE_FOR_OP``)."""
        code = self.code_for_op.get(op)
        if code is None:
            raise LoweringError(
                f"jit(backend='gpu'): no WGSL for kernel op {op!r} on {np.dtype(dt).name}"
            )
        return code(self, wgsl_type(dt), dt, a)

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

    def combine(self, op: str, dt, acc: str, val: str, const: bool = False) -> str:
        """``acc`` combined with ``val`` by ``op``; ``const``: ``val`` is a literal's text,
        made opaque where it is a float (a store's combine, say x.at[i].add(-0.0))."""
        if const and wgsl_type(dt) == "f32":
            val = self._opaque_literal(val)
        return self._op(op, dt, [acc, val])

    def better(self, op: str, dt, val: str, acc: str, ties: tuple[str, str] | None) -> str:
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

    # reductions: the skeleton is KernelRenderer.reduce
    def reduce(self, e: Expr) -> str:
        """A reduction as loops in the invocation, or, at the top level of a tree kernel,
        by the whole workgroup (``reduce.tree_reduce``)."""
        if self.tree is not None and self.scope(e) is None:
            return tree_reduce(self, e)
        return super().reduce(e)

    def before_reduction_body(self, e: Expr, parent: Var | None) -> None:
        """Count the reduction's loop iterations (``Shader.loop_iterations``)."""
        trips = self.trips[parent]
        for v in e.attr.vars:
            trips *= v.extent
            self.trips[v] = trips
            self.iterations += trips

    def reduction_loops(self, e: Expr, parent: Var | None, val: str) -> str:
        """The loops of reduction ``e`` folding ``val`` (its body's value), written into
        ``parent``'s lines: an accumulator, or for argmax/argmin a value and a position."""
        red = e.attr
        body = e.args[0]
        const = body.op == "const"
        op = red.op
        arg = op in ("argmax", "argmin")
        dt = body.dtype
        if (
            op in ("add", "mul")
            and wgsl_type(dt) == "f32"
            and math.prod(v.extent for v in red.vars) <= _UNROLLED
        ):
            val = self._opaque(val, body)  # (sum of [x, -x] gave 0 for NaN once unrolled)
            const = False
        acc = self.tmp("acc")
        init = literal(self.reduction_identity(op, dt), dt)
        out = self.lines[parent]
        decl, update, final = self.accumulate(op, dt, acc, val, init, const)
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
            chunk += [
                f"  if {self.better(op, dt, val, acc, None)} {{",
                f"    {acc} = {val};",
                f"    {pos} = {flat};",
                "  }",
            ]
        else:
            chunk += update
        chunk += ["  }"] * len(red.vars)
        out.extend(chunk + final)
        return pos if arg else acc

    def accumulate(
        self, op: str, dt, acc: str, val: str, init: str, const: bool = False
    ) -> tuple[list[str], list[str], list[str]]:
        """(declarations, loop body, lines after the loop) folding ``val`` (``const``: a
        literal's text) into ``acc`` with ``op``. A float sum is blocked, its error bounded:
        16 elements go into a partial sum, 16 of those into a second, 16 of those into a
        third, and those into ``acc`` (``SUM_LEVELS``): error at most about (48 + n / 4096)
        roundings instead of n, a few ulps in practice (a serial sum of 60000 values near
        1000 was 5400 ulps off; the blocks of 16 also keep sums of equal values, whose
        roundings add up, within two). Its zero is opaque: ``0 + x`` folded to ``x`` would
        keep a -0."""
        t = wgsl_type(dt)
        if op in ("argmax", "argmin"):  # (the caller writes the update)
            return [f"  var {acc}: {t} = {init};"], [], []
        if op != "add" or t != "f32":
            return (
                [f"  var {acc}: {t} = {init};"],
                [f"  {acc} = {self.combine(op, dt, acc, val, const)};"],
                [],
            )
        zero = self._opaque_literal(init)
        parts, n = [self.tmp("part") for _ in SUM_LEVELS], self.tmp("n")
        decl = [f"  var {v}: f32 = {zero};" for v in (acc, *parts)] + [f"  var {n}: u32 = 0u;"]
        update = [f"  {parts[0]} = {parts[0]} + {val};", f"  {n} = {n} + 1u;"]
        size, indent = 1, "  "
        for lower, upper in zip(parts, [*parts[1:], acc]):  # a full level moves up
            size *= SUM_LEVELS[parts.index(lower)]
            update += [
                f"{indent}if (({n} & {size - 1}u) == 0u) {{",
                f"{indent}  {upper} = {upper} + {lower};",
                f"{indent}  {lower} = {zero};",
            ]
            indent += "  "
        update += [f"{indent[: -2 * i]}}}" for i in range(1, len(parts) + 1)]
        rest = parts[0]
        for v in parts[1:]:
            rest = f"({v} + {rest})"
        return decl, update, [f"  {acc} = {acc} + {rest};"]

    # the shader
    def source(self) -> Shader:
        kern = self.kern
        loops = kern.loops
        for i, v in enumerate(loops):
            if not self.serial:
                self.chain[v] = ()  # (every invocation has its element's indices)
            else:
                self.open_scope(v, loops[i - 1] if i else None)
                self.trips[v] = self.trips.get(loops[i - 1], 1) * v.extent if i else v.extent
                self.iterations += self.trips[v]
        for st in kern.stores:
            self._store(st)
        total = self.outputs
        head, guard = self.slots.scope_lines(self.scope_of)
        if self.tree is not None:
            return tree_source(self, head, guard)
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
            head += [
                f"  let flat = i32({flat});",
                f"  if (flat >= {literal(total, INDEX)}) {{ return; }}",
            ]
            body = head + self.loop_indices() + self.lines[None]
        text = "\n".join(
            [
                *self.slots.declarations(),
                "",
                self.src.prelude(),
                "",
                f"@compute @workgroup_size({size})",
                "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
                "@builtin(num_workgroups) nwg: vec3<u32>) {",
                *(body if self.style == "gpu" else schedule(body)),
                "}",
                "",
            ]
        )
        return Shader(kern.name, text, self.slots.bindings(), grid, self.iterations)

    def loop_indices(self) -> list[str]:
        """The kernel's loop indices of the output element ``flat`` (row-major)."""
        out, stride = [], self.outputs
        if not stride:
            return out  # nothing runs
        for i, v in enumerate(self.kern.loops):
            stride //= v.extent
            q = "flat" if stride == 1 else f"(flat / {stride}i)"
            out.append(f"  let v{v.id} = {q if i == 0 else f'{q} % {v.extent}i'};")
        return out

    def _store(self, st) -> None:
        val = self.value(st.value)
        idx = self.value(st.index)
        mask = None if st.mask is None else self.value(st.mask)
        if self.tree is not None and self.tree.partial:
            return  # the first pass of a tree reduction writes partials only
        where = self.kern.loops[-1] if self.serial and self.kern.loops else None
        lines = self.lines[where]
        if self.scatter is not None:
            return scatter_store(self, st, val, idx, mask, lines)
        indent = "  "
        conds = [c for c in (mask, "lid == 0u" if self.tree is not None else None) if c]
        if conds:
            lines.append(f"  if ({' && '.join(f'({c})' for c in conds)}) {{")
            indent = "    "
        ref = self.slots.ref(st.buffer, idx, write=True)
        if st.combine is not None:
            old = from_word(ref, st.buffer.dtype)
            val = self.combine(st.combine, st.buffer.dtype, old, val, st.value.op == "const")
        lines.append(f"{indent}{ref} = {to_word(val, st.buffer.dtype)};")
        if conds:
            lines.append("  }")


#: a u32 zero no compiler can prove (u (u + 1) is even), for written-out math functions'
#: opaque ORs (see wgsl_math); from the uniform ``nwg.x``, so computed once per workgroup
_ZERO = "fg_zero"
#: a float sum's levels of partial sums (see ``KernelShader.accumulate``; powers of two)
SUM_LEVELS = (16, 16, 16)
#: operations on two floats that shader compilers rewrite when the operands share a value
_SHARING_OPS = frozenset({"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"})
#: float sums and products of at most this many elements hide each element behind an opaque
#: zero: the shader compiler unrolls such loops, and x + y + (-x) then meets its own operand
_UNROLLED = 256
#: how many operations deep two operands are searched for a shared value (Mesa's patterns
#: are at most a few operations deep)
_REACH = 3


def render_kernel(
    kern: Kernel,
    place: dict[int, tuple[str, int | str]],
    fused_fma: bool = True,
    scope: Scope = TOP,
    tree: Tree | None = None,
    scatter: Scatter | None = None,
    style: str | None = None,
) -> Shader:
    """The shader of ``kern``; ``place`` maps a buffer id to (slot key, word offset: an int,
    or an i32 expression in the loop counters of ``scope``). ``fused_fma``: the adapter's fma
    rounds once (else math functions compute it in software: their error-free
    transformations need a fused one). ``tree``: compute the top-level reductions with
    workgroup trees (this shader is one of the passes :class:`Tree` describes).
    ``scatter``: run a scatter kernel's iterations in parallel (:class:`Scatter`).
    ``style``: "gpu" or "cpu-driver" (:func:`kernel_style`; None: the adapter's)."""
    return KernelShader(kern, place, fused_fma, scope, tree, scatter, style).source()
