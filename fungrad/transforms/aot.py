"""Ahead-of-time compilation: ``jit(f).trace(*args)`` gives a :class:`TracedStage` (``f``'s
jaxpr for one signature), ``jit(f).lower(*args)`` (or ``trace(...).lower()``) a
:class:`Lowered`, whose ``compile()`` gives a :class:`Compiled` (``jax.stages``)."""

from __future__ import annotations

from fungrad import core, tree_util
from fungrad.array import Array
from fungrad.lowering import profile as step_profile
from fungrad.transforms import cost
from fungrad.transforms.jit_cache import JitFunction, Traced, as_operand

__all__ = ["Compiled", "Lowered", "TracedStage", "lower", "trace"]


class TracedStage:
    """``jit(f).trace(*args)``: ``f`` traced for one signature (``jax.stages.Traced``).
    ``jaxpr`` is the ClosedJaxpr, ``out_info`` the outputs as a pytree of ShapeDtypeStructs,
    ``lower()`` the :class:`Lowered` stage (then ``compile()``), as in JAX's AOT API."""

    def __init__(self, lowered: Lowered):
        self._lowered = lowered

    @property
    def jaxpr(self) -> core.ClosedJaxpr:
        return self._lowered.jaxpr

    @property
    def fun_name(self) -> str:
        return self._lowered._info.name

    @property
    def out_avals(self):
        return tree_util.tree_unflatten(self._lowered.out_tree, list(self._lowered.out_avals))

    @property
    def out_info(self):
        from fungrad.shape_dtype_struct import ShapeDtypeStruct

        return tree_util.tree_unflatten(
            self._lowered.out_tree,
            [
                ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                for a in self._lowered.out_avals
            ],
        )

    def lower(self, *, lowering_platforms=None) -> Lowered:
        """The Lowered stage (``lowering_platforms`` is accepted for JAX's signature: fungrad
        lowers for the backend the jitted function was created for)."""
        del lowering_platforms
        return self._lowered


class Lowered:
    """``jit(f).lower(*args)``: ``f`` traced for one signature (``jax.stages.Lowered``).
    Arguments may be ShapedArrays (as JAX's ShapeDtypeStructs) instead of arrays.

    ``as_text()`` is the executable's text (optimised jaxpr, fusion plan, LLVM IR);
    ``compile()`` gives a :class:`Compiled`. ``jaxpr`` is the traced ClosedJaxpr.
    """

    def __init__(self, info: JitFunction, traced: Traced, in_tree, in_avals, donated):
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

    def cost_analysis(self) -> dict[str, float]:
        """``{"flops", "transcendentals", "bytes accessed"}`` of the compiled program, counted
        on its optimised jaxpr and fusion plan (fungrad/transforms/cost.py says how)."""
        return cost.cost_analysis(self._exe)

    def memory_analysis(self) -> cost.CompiledMemoryStats:
        """Argument, output, temporary, code and alias sizes in bytes
        (:class:`~fungrad.transforms.cost.CompiledMemoryStats`, JAX's attribute names)."""
        return cost.memory_analysis(self._exe)

    def __call__(self, *args, **kwargs):
        info = self._lowered._info
        leaves, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(
                f"Compiled {info.name}: the function was compiled for arguments with "
                f"pytree structure {self.in_tree} but is called with {tree} (static "
                "arguments are not passed to a Compiled function)"
            )
        paths = self._lowered._traced.paths
        arrays = [as_operand(x, info, lambda p=p: p) for x, p in zip(leaves, paths)]
        if any(isinstance(x, core.Tracer) for x in arrays):
            raise TypeError(
                f"Compiled {info.name} cannot be called with traced values: a "
                "function compiled ahead of time cannot be transformed; apply the "
                "transform to the jitted function instead"
            )
        mismatches = [
            f"Argument {p!r} compiled with {a.str_short()} and called with {x.aval.str_short()}"
            for p, a, x in zip(paths, self.in_avals, arrays)
            if a.strip_weak_type() != x.aval.strip_weak_type()
        ]
        if mismatches:
            raise TypeError(
                "Argument types differ from the types for which this computation "
                f"was compiled (Compiled {info.name}). The mismatches are:\n"
                + "\n".join(mismatches)
            )
        exe = self._exe
        if step_profile.sinks:  # fungrad.profile(): the build that times each step
            exe = info.profiled_executable(self._lowered._traced)
        outs = exe.call(arrays)
        for i in self._lowered._donated:
            if type(leaves[i]) is Array:
                leaves[i].delete()
        return tree_util.tree_unflatten(self.out_tree, outs)


def lower(info: JitFunction, args, kwargs) -> Lowered:
    """``jit(f).lower(*args, **kwargs)``: trace (or find in the cache) ``f`` for these arguments;
    ShapedArrays may stand for arguments of that type."""
    c, leaves, avals, traced = info.prepare(args, kwargs, abstract=True)
    if traced.hoisted:
        raise TypeError(
            f"jit({info.name}).lower: the function closes over values traced by "
            "an enclosing transform, so it cannot be compiled on its own; pass "
            "them as arguments instead"
        )
    return Lowered(info, traced, c.in_tree, avals, info.donated_leaves(c))


def trace(info: JitFunction, args, kwargs) -> TracedStage:
    """``jit(f).trace(*args, **kwargs)``: trace ``f`` for these arguments (ShapedArrays or
    ShapeDtypeStructs may stand for arguments of that type); nothing is compiled yet."""
    return TracedStage(lower(info, args, kwargs))
