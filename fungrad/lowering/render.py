"""What every backend's renderer shares: the kernel-writer base and the dispatch tables.

A backend renders a :class:`~fungrad.lowering.fusion.Program` step by step. Kernels
(``fusion.Kernel``: loops over an index space, stores of interned expressions) are written by
a subclass of :class:`KernelRenderer`; the other step kinds are plain data (``fusion.Gemm``,
the steps of ``steps.py``) rendered through the backend's :class:`StepRenderers` table.

:class:`KernelRenderer` holds what both kernel writers (``cpu/kernel.py``'s LLVM writer, the
GPU's WGSL shader) do the same way:

* every expression node is rendered once (``names``: node id -> value name, the memo) and
  placed in the innermost loop *scope* where all its indices are defined (``chain``: loop
  variable -> the loop variables enclosing it, outermost first; ``lines``: scope -> its
  lines, ``None`` being the kernel's top level);
* fresh names for temporaries (:meth:`tmp`), literals and loop indices by dtype;
* the reduction skeleton (:meth:`reduce`): open a scope per reduced variable below the scope
  of the reduction, render the body inside them, then let the backend write the loops and
  the accumulation (:meth:`reduction_loops`);
* dispatch of every other kernel op through the class's ``code_for_op`` table.

Adding a kernel op (the closed op set is ``kernel.OPS``): one entry in each backend's
``code_for_op`` (``cpu/llvm_ops.py`` and ``gpu/ops.py``, each a ``CODE_FOR_OP``), plus its numpy
meaning in ``kernel.py``. A missing entry is a ``TypeError`` naming the backend and the op.

Adding a step kind: one dataclass (in ``steps.py``, with ``reads()``/``writes()``), the
lowering rule that appends it, and one function per backend registered in that backend's
step table (``cpu/llvm.py``'s ``STEP_RENDERERS``, ``gpu/dispatches.py``'s).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fungrad.lowering.kernel import Buffer, Expr, Reduction, Var, innermost_loop, reduce_identity

__all__ = ["KernelRenderer", "StepRenderers", "kernel_record"]


class KernelRenderer:
    """Base of a backend's kernel writer (see the module docstring). Subclasses set
    ``backend``, ``value_prefix`` and ``code_for_op`` and implement :meth:`literal`,
    :meth:`node` and :meth:`reduction_loops`."""

    #: the backend's name in errors
    backend: ClassVar[str] = "?"
    #: prefix of local value names in the target language ("%" in LLVM IR, none in WGSL)
    value_prefix: ClassVar[str] = ""
    #: kernel op name -> ``fn(writer, *context)`` returning the value's name or text;
    #: ``context`` is what the backend passes to :meth:`render_op` (the LLVM writer: the
    #: node, its scope's lines, the result's name and the operands' values)
    code_for_op: ClassVar[dict] = {}

    def __init__(self, kern):
        self.kern = kern
        self.lines: dict[Var | None, list[str]] = {None: []}
        self.chain: dict[Var, tuple[Var, ...]] = {}
        self.names: dict[int, str] = {}
        self.n = 0

    # names and scopes ----------------------------------------------------------------------
    def tmp(self, hint: str = "t") -> str:
        """A fresh local name."""
        self.n += 1
        return f"{self.value_prefix}{hint}{self.n}"

    def index_name(self, v: Var) -> str:
        """The name of loop variable ``v``'s index."""
        return f"{self.value_prefix}v{v.id}"

    def scope(self, e: Expr) -> Var | None:
        """The innermost open loop where every index of ``e`` is defined (None: top level)."""
        return innermost_loop(self.chain, e)

    def open_scope(self, v: Var, parent: Var | None) -> None:
        """Open loop ``v``'s scope directly inside ``parent``'s (None: the top level)."""
        self.chain[v] = (self.chain[parent] if parent is not None else ()) + (v,)
        self.lines[v] = []

    # values --------------------------------------------------------------------------------
    def value(self, e: Expr) -> str:
        """The name (or text) of ``e``'s value, rendered once (:meth:`compute`).

        Operands are rendered before the nodes that use them, in the order a recursive
        descent would (first operand first), but from an explicit stack: an expression
        thousands of nodes deep (an unrolled loop's chain) needs no Python frame per level.
        A reduction's scopes open (:meth:`open_reduction`, :meth:`before_reduction_body`)
        before its body is rendered and its loops are written (:meth:`reduction_loops`)
        after, as :meth:`reduce` does."""
        names = self.names
        name = names.get(id(e))
        if name is not None:
            return name
        stack = [e]
        entered: set[int] = set()  # nodes whose operands are on the stack above them
        opened: dict[int, Var | None] = {}  # id of a reduction whose body is rendered -> parent
        while stack:
            x = stack[-1]
            k = id(x)
            if k in names:
                stack.pop()
            elif k in entered:  # its operands are rendered now
                stack.pop()
                if k in opened:
                    names[k] = self.reduction_loops(x, opened.pop(k), names[id(x.args[0])])
                else:
                    names[k] = self.compute(x)
            elif x.op == "reduce" and self.split_reduce(x):
                entered.add(k)
                parent = opened[k] = self.open_reduction(x)
                self.before_reduction_body(x, parent)
                stack.append(x.args[0])
            else:
                first = [a for a in self.operands(x) if id(a) not in names]
                if first:
                    entered.add(k)
                    stack.extend(reversed(first))
                else:
                    stack.pop()
                    names[k] = self.compute(x)  # (operands named: compute does not descend)
        return names[id(e)]

    def operands(self, e: Expr) -> tuple[Expr, ...]:
        """The nodes :meth:`compute` asks :meth:`value` for (rendered before ``e``): its
        arguments, none for a reduction (:meth:`reduce` renders its body)."""
        return () if e.op == "reduce" else e.args

    def split_reduce(self, e: Expr) -> bool:
        """Whether :meth:`value` renders reduction ``e`` as :meth:`reduce` does, step by step
        with its body on the explicit stack (True unless a subclass overrides :meth:`reduce`
        and does not override this)."""
        return type(self).reduce is KernelRenderer.reduce

    def compute(self, e: Expr) -> str:
        """Render ``e`` (not yet rendered): literals, indices and reductions here, every
        other op by :meth:`node` on its operands' values."""
        op = e.op
        if op == "const":
            return self.literal(e.attr, e.dtype)
        if op == "idx":
            return self.index_name(e.attr)
        if op == "reduce":
            return self.reduce(e)
        return self.node(e, [self.value(a) for a in e.args])

    def literal(self, value, dtype) -> str:
        """The target language's text of a constant."""
        raise TypeError(f"{type(self).__name__} does not implement literal()")

    def node(self, e: Expr, args: list[str]) -> str:
        """Render op ``e`` on its operands' values ``args`` (usually via :meth:`render_op`)."""
        raise TypeError(f"{type(self).__name__} does not implement node()")

    def render_op(self, op: str, *context) -> str:
        """``code_for_op[op](self, *context)``. Keyed by the op's name, not bound to an
        ``Expr``: a backend may also render ops it composes itself (a reduction's combine)."""
        fn = self.code_for_op.get(op)
        if fn is None:
            raise TypeError(
                f"{self.backend} renderer: no code for kernel op {op!r} (add an "
                "entry to its code_for_op table)"
            )
        return fn(self, *context)

    # reductions ----------------------------------------------------------------------------
    def reduce(self, e: Expr) -> str:
        """The reduction skeleton: the reduced variables' scopes open inside the reduction's
        own scope (:meth:`open_reduction`), the backend's preparations
        (:meth:`before_reduction_body`), the body's value rendered inside them, then the
        loops and the accumulation written into the parent scope
        (:meth:`reduction_loops`); returns the result's name."""
        parent = self.open_reduction(e)
        self.before_reduction_body(e, parent)
        return self.reduction_loops(e, parent, self.value(e.args[0]))

    def open_reduction(self, e: Expr) -> Var | None:
        """Open the scopes of reduction ``e``'s variables, nested in order inside the scope
        where ``e`` is placed; returns that scope."""
        parent = self.scope(e)
        outer = parent
        for v in e.attr.vars:
            self.open_scope(v, outer)
            outer = v
        return parent

    def before_reduction_body(self, e: Expr, parent: Var | None) -> None:
        """Hook: runs after the reduced scopes are open, before the body is rendered."""

    def reduction_loops(self, e: Expr, parent: Var | None, body: str) -> str:
        """Write reduction ``e``'s loops (their scopes' lines, ``self.lines.pop(v)``) and
        its accumulation of ``body`` into ``parent``'s lines; return the result's name."""
        raise TypeError(f"{type(self).__name__} does not implement reduction_loops()")

    @staticmethod
    def reduction_identity(op: str, dtype):
        """The starting value of a reduction by ``op`` (argmax/argmin start from the
        identity of max/min)."""
        return reduce_identity({"argmax": "max", "argmin": "min"}.get(op, op), dtype)


def kernel_record(kern, buffer_ids) -> tuple:
    """What a kernel writer's output depends on, with every name left out: the loop extents
    and the stores, their expressions as a DAG of (op, dtype, attribute, operand numbers) in
    first-visit order, buffers as their position in ``buffer_ids`` (the order of the kernel
    function's parameters) and dtype, loop variables numbered in order of appearance.
    Kernels with equal records render to the same code up to the names of their values, so a
    renderer defines one function for all of them (the MLP step updates two bias vectors
    with the same code). Expressions are interned (``kernel.Ctx``), so equal subtrees are one
    node and numbering by identity loses nothing."""
    buffer_pos = {bid: i for i, bid in enumerate(buffer_ids)}
    var_num: dict[Var, int] = {}
    nodes: list[tuple] = []
    node_num: dict[int, int] = {}

    def var(v: Var) -> tuple:
        n = var_num.setdefault(v, len(var_num))
        return (n, v.extent, v.bound)

    def attr(e: Expr):
        a = e.attr
        if e.op == "const":
            return np.asarray(a, e.dtype).tobytes()
        if isinstance(a, Var):
            return var(a)
        if isinstance(a, Buffer):
            return (buffer_pos[a.id], a.dtype.str)
        if isinstance(a, Reduction):
            return (a.op, tuple(var(v) for v in a.vars))
        return a

    def num(root: Expr | None) -> int | None:
        # post-order numbering, first operand first, from an explicit stack (deep chains)
        if root is None:
            return None
        stack = [root]
        while stack:
            e = stack[-1]
            if id(e) in node_num:
                stack.pop()
                continue
            first = [x for x in e.args if id(x) not in node_num]
            if first:
                stack.extend(reversed(first))
                continue
            stack.pop()
            node_num[id(e)] = len(nodes)
            nodes.append((e.op, e.dtype.str, attr(e), tuple(node_num[id(x)] for x in e.args)))
        return node_num[id(root)]

    loops = tuple(var(v) for v in kern.loops)
    stores = tuple(
        (
            buffer_pos[st.buffer.id],
            st.buffer.dtype.str,
            num(st.index),
            num(st.value),
            st.combine,
            num(st.mask),
            st.once,
        )
        for st in kern.stores
    )
    return loops, stores, tuple(nodes)


class StepRenderers:
    """A backend's table of step renderers: step type -> ``fn(writer, step, *context)``.

    Lookup is by exact type (a step kind is a leaf class); a step without an entry is a
    ``TypeError`` naming the backend and the step, never a silent skip."""

    def __init__(self, backend: str, table: dict[type, object]):
        self.backend = backend
        self.table = dict(table)

    def __call__(self, writer, step, *context):
        fn = self.table.get(type(step))
        if fn is None:
            raise TypeError(
                f"{self.backend} renderer: no renderer for step kind "
                f"{type(step).__name__} (register one in its step table)"
            )
        return fn(writer, step, *context)

    def __contains__(self, kind: type) -> bool:
        return kind in self.table
