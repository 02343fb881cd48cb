"""Cost and memory analysis of a compiled function (``Compiled.cost_analysis()`` and
``Compiled.memory_analysis()``, as ``jax.stages.Compiled`` has them).

Counts follow XLA's cost model, which JAX reports:

* ``flops``: a ``dot_general`` is ``2 * batch * M * N * K``; a convolution ``2 * (output
  elements) * (kernel elements per output feature)``; every other elementwise operation
  (arithmetic, comparisons, select, converts) one per output element; a reduction or cumulative
  operation one per input element; moves (reshape, transpose, slices, gathers, broadcasts...) none.
* ``transcendentals``: one per output element of exp, log, tanh, sin, erf... (these are not
  also counted as flops).
* ``bytes accessed``: the fusion plan's traffic: each step (a fused kernel, a matrix product,
  a library call) reads each buffer it reads and writes each buffer it writes once.

The counts come from the *optimised* jaxpr, the one the executable runs. Inside control flow a
``scan`` body counts ``length`` times, a ``while_loop`` body and condition once (its trip count
is not known ahead of time) and a ``cond`` its most expensive branch. Library operations
(linear algebra decompositions, FFTs, sorting) count no flops: their bytes are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fungrad import core

__all__ = ["CompiledMemoryStats", "cost_analysis", "memory_analysis"]

_TRANSCENDENTAL = frozenset(
    """exp exp2 log log1p expm1 sqrt rsqrt cbrt sin cos tan asin acos atan atan2 sinh cosh tanh
    asinh acosh atanh logistic erf erfc erf_inv lgamma digamma polygamma igamma igammac
    igamma_grad_a random_gamma_grad bessel_i0e bessel_i1e zeta pow""".split()
)

_ELEMENTWISE = frozenset(
    """add sub mul div rem neg sign floor ceil round abs max min nextafter square reciprocal
    integer_pow is_finite eq ne lt le gt ge and or not xor shift_left shift_right_logical
    shift_right_arithmetic population_count clz select_n clamp convert_element_type real imag
    conj complex add_any""".split()
)

_REDUCTIONS = frozenset(
    """reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or reduce_xor argmax argmin
    cumsum cumprod cummax cummin cumlogsumexp reduce_precision""".split()
)


def _size(aval) -> int:
    return math.prod(getattr(aval, "shape", ()))


def _nbytes(aval) -> int:
    dtype = getattr(aval, "dtype", None)
    return _size(aval) * dtype.itemsize if dtype is not None else 0


def _jaxpr_of(x):
    if isinstance(x, core.ClosedJaxpr):
        return x.jaxpr
    if isinstance(x, core.Jaxpr):
        return x
    return None


def _dot_flops(eqn) -> int:
    (lc, _rc), (lb, _rb) = eqn.params["dimension_numbers"]
    lhs, rhs = (v.aval for v in eqn.invars)
    contract = math.prod(lhs.shape[d] for d in lc)
    batch = math.prod(lhs.shape[d] for d in lb)
    if contract * batch == 0:
        return 0
    m = _size(lhs) // (contract * batch)  # the free (non-contracted, non-batch) elements
    n = _size(rhs) // (contract * batch)
    return 2 * batch * m * n * contract


def _conv_flops(eqn) -> int:
    rhs = eqn.invars[1].aval
    out = eqn.outvars[0].aval
    rhs_spec = eqn.params["dimension_numbers"].rhs_spec
    out_features = rhs.shape[rhs_spec[0]]
    if out_features == 0:
        return 0
    return 2 * _size(out) * (_size(rhs) // out_features)


def _jaxpr_cost(jaxpr: core.Jaxpr) -> tuple[int, int]:
    """(flops, transcendentals) of ``jaxpr``'s equations, sub-jaxprs included."""
    flops = trans = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        out = sum(_size(v.aval) for v in eqn.outvars)
        if name == "dot_general":
            flops += _dot_flops(eqn)
        elif name == "conv_general_dilated":
            flops += _conv_flops(eqn)
        elif name in _TRANSCENDENTAL:
            trans += out
        elif name in _ELEMENTWISE:
            flops += out
        elif name in _REDUCTIONS:
            flops += sum(_size(v.aval) for v in eqn.invars)
        else:
            subs = [
                j
                for p in eqn.params.values()
                for j in (p if isinstance(p, (tuple, list)) else (p,))
                if _jaxpr_of(j) is not None
            ]
            if not subs:
                continue
            costs = [_jaxpr_cost(_jaxpr_of(j)) for j in subs]
            if name == "cond":
                f, t = max(costs)
            else:
                f, t = sum(c[0] for c in costs), sum(c[1] for c in costs)
            times = int(eqn.params.get("length", 1)) if name == "scan" else 1
            flops += f * times
            trans += t * times
    return flops, trans


def _step_bytes(steps) -> int:
    total = 0
    for step in steps:
        if not (hasattr(step, "reads") and hasattr(step, "writes")):
            continue
        total += sum(b.nbytes for b in step.reads()) + sum(b.nbytes for b in step.writes())
    return total


def cost_analysis(exe) -> dict[str, float]:
    """``{"flops", "transcendentals", "bytes accessed"}`` of an executable (see the module)."""
    flops, trans = _jaxpr_cost(exe.jaxpr.jaxpr)
    return {
        "flops": float(flops),
        "transcendentals": float(trans),
        "bytes accessed": float(_step_bytes(exe.program.steps)),
    }


@dataclass(frozen=True)
class CompiledMemoryStats:
    """Memory a compiled function uses, in bytes (JAX's ``CompiledMemoryStats`` names).

    ``argument_size_in_bytes`` and ``output_size_in_bytes``: the arguments' and results'
    arrays; ``temp_size_in_bytes``: the scratch area the program's temporaries share (one per
    concurrent call); ``generated_code_size_in_bytes``: the native object code (0 for the GPU,
    whose shaders the driver compiles); ``alias_size_in_bytes``: output bytes that reuse an
    argument's memory (always 0: outputs are fresh arrays, donation only deletes the
    arguments); ``constant_size_in_bytes`` (beyond JAX): the constants the program holds.
    """

    argument_size_in_bytes: int
    output_size_in_bytes: int
    temp_size_in_bytes: int
    generated_code_size_in_bytes: int
    alias_size_in_bytes: int
    constant_size_in_bytes: int


def memory_analysis(exe) -> CompiledMemoryStats:
    """The :class:`CompiledMemoryStats` of an executable."""
    module = getattr(exe, "module", None)
    code = module.stats.object_bytes if module is not None else 0
    return CompiledMemoryStats(
        argument_size_in_bytes=sum(_nbytes(a) for a in exe.in_avals),
        output_size_in_bytes=sum(_nbytes(a) for a in exe.out_avals),
        temp_size_in_bytes=int(exe.program.scratch_bytes),
        generated_code_size_in_bytes=int(code),
        alias_size_in_bytes=0,
        constant_size_in_bytes=sum(int(c.nbytes) for _, c in exe.program.consts),
    )
