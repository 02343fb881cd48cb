"""The split rules of the primitives with complex operands (``complex_split.py`` explains
the pass): each takes a :class:`~fungrad.lowering.complex_split.Pair` ``(re, im)`` of real
values for a complex operand (a real value for a real one) and returns the list of its
outputs the same way. The arithmetic is in ``complex_formulas.py``. Beyond it:

* ``dot_general``, ``conv_general_dilated``: four real products (the three-product Gauss
  trick loses accuracy to cancellation); ``reduce_prod``, ``reduce_max``, ``reduce_min``:
  trees that combine halves of the flattened reduced axes (the tree the eager impl uses);
  ``cumprod``, ``cummax``, ``cummin``, ``cumlogsumexp``: ``ceil(log2 n)`` doubling steps;
* ``sort``: a complex key is two keys (real part, then imaginary part), numpy's order;
* ``scatter-mul``, ``scatter-max``, ``scatter-min``, ``reduce_window_max``,
  ``reduce_window_min``: written with lax operations, so their rules live in
  :mod:`fungrad.lax.complex_split_rules` (this layer does not import lax);
* ``convert_element_type`` from complex to real keeps the real part (JAX's rule);
* structural and linear primitives (reshape, slice, gather, scatter-add, reduce_sum, cumsum,
  select_n, ...) apply to each half;
* ``cond``, ``while``, ``scan``: their sub-jaxprs are split too, a complex carry or operand
  becoming two adjacent real ones; calls (``jit``, ``checkpoint``, ``custom_jvp_call``,
  ``custom_vjp_call``) and ``linear_solve`` (its solve) are inlined, split.
"""

from __future__ import annotations

import math

import numpy as np

from fungrad import core, dtypes, tree_util
from fungrad.array import Array
from fungrad.core import ShapedArray
from fungrad.lowering.complex_formulas import (
    _p,
    add,
    and_,
    as_pair,
    broadcast,
    cabs,
    cacos,
    cacosh,
    cadd,
    casin,
    casinh,
    catan,
    catan2,
    catanh,
    ccos,
    ccosh,
    cdiv,
    cexp,
    cexpm1,
    cinteger_pow,
    clog,
    clog1p,
    clogaddexp,
    clogistic,
    cmax,
    cmin,
    cmul,
    cneg,
    constant,
    cpow,
    cscale,
    csign,
    csin,
    csinh,
    csqrt,
    csub,
    ctan,
    ctanh,
    eq,
    ne,
    neg,
    one_like,
    or_,
    sub,
    zeros_like,
)
from fungrad.lowering.complex_split import (
    _BUILTIN,
    Pair,
    flatten,
    inline_closed,
    split_closed,
    unflatten,
)
from fungrad.lowering.fusion import LoweringError

# ---------------------------------------------------------------------------------------------
# The rules


def _rule(*names):
    def register(fn):
        for n in names:
            _BUILTIN[n] = fn
        return fn

    return register


def _unary(fn):
    return lambda x, **_: [fn(as_pair(x))]


def _binary(fn):
    return lambda x, y, **_: [fn(as_pair(x), as_pair(y))]


for _name, _fn in {
    "exp": cexp,
    "log": clog,
    "sqrt": csqrt,
    "sin": csin,
    "cos": ccos,
    "tan": ctan,
    "sinh": csinh,
    "cosh": ccosh,
    "tanh": ctanh,
    "expm1": cexpm1,
    "log1p": clog1p,
    "asin": casin,
    "acos": cacos,
    "atan": catan,
    "asinh": casinh,
    "acosh": cacosh,
    "atanh": catanh,
    "logistic": clogistic,
    "sign": csign,
    "neg": cneg,
    "square": lambda z: cmul(z, z),
    "rsqrt": lambda z: cdiv(one_like(z), csqrt(z)),
    "exp2": lambda z: cexp(cscale(z, math.log(2))),
}.items():
    _BUILTIN[_name] = _unary(_fn)

for _name, _fn in {
    "add": cadd,
    "sub": csub,
    "mul": cmul,
    "div": cdiv,
    "max": cmax,
    "min": cmin,
    "atan2": catan2,
}.items():
    _BUILTIN[_name] = _binary(_fn)


@_rule("abs")
def _abs(x, **_):
    return [cabs(x)]


@_rule("real")
def _real(x, **_):
    return [x.re]


@_rule("imag")
def _imag(x, **_):
    return [x.im]


@_rule("complex")
def _complex(x, y, **_):
    return [Pair(x, y)]


@_rule("conj")
def _conj_rule(x, **_):
    return [Pair(x.re, neg(x.im)) if type(x) is Pair else Pair(x, zeros_like(x))]


@_rule("eq")
def _eq(x, y, **_):
    x, y = as_pair(x), as_pair(y)
    return [and_(eq(x.re, y.re), eq(x.im, y.im))]


@_rule("ne")
def _ne(x, y, **_):
    x, y = as_pair(x), as_pair(y)
    return [or_(ne(x.re, y.re), ne(x.im, y.im))]


@_rule("pow")
def _pow(x, y, **_):
    return [cpow(as_pair(x), y)]


@_rule("integer_pow")
def _integer_pow(x, *, y, **_):
    return [cinteger_pow(x, y)]


@_rule("clamp")
def _clamp(lo, x, hi, **_):
    return [cmin(cmax(as_pair(x), as_pair(lo)), as_pair(hi))]


@_rule("convert_element_type")
def _convert(x, *, new_dtype, weak_type, **params):
    new_dtype = np.dtype(new_dtype)
    target = dtypes.real_dtype(new_dtype)

    def conv(v):
        return _p("convert_element_type", v, new_dtype=target, weak_type=weak_type, **params)

    if type(x) is Pair:
        if new_dtype.kind == "c":
            return [Pair(conv(x.re), conv(x.im))]
        return [conv(x.re)]  # JAX: the imaginary part is discarded
    return [Pair(conv(x), zeros_like(conv(x)))]


def _halves(name: str):
    """The rule of a primitive that acts on the real and imaginary parts separately (the
    structural and linear ones): the same primitive on each half, real operands (indices,
    predicates) shared."""

    def rule(*args, **params):
        re = _p(name, *[a.re if type(a) is Pair else a for a in args], **params)
        im = _p(name, *[a.im if type(a) is Pair else a for a in args], **_im_params(params))
        return [Pair(re, im)]

    return rule


def _im_params(params: dict) -> dict:
    fill = params.get("fill_value")
    if fill is not None and isinstance(fill, complex):
        return {**params, "fill_value": fill.imag}
    return params


for _name in (
    "broadcast_in_dim",
    "reshape",
    "transpose",
    "squeeze",
    "rev",
    "slice",
    "concatenate",
    "pad",
    "dynamic_slice",
    "dynamic_update_slice",
    "scatter",
    "scatter-add",
    "reduce_sum",
    "cumsum",
    "select_n",
    "stop_gradient",
    "name",
    "reduce_precision",
    "reduce_window_sum",
):
    _BUILTIN[_name] = _halves(_name)


@_rule("gather")
def _gather(operand, indices, **params):
    fill = params.get("fill_value")
    re_params = params
    if fill is not None and isinstance(fill, complex):
        re_params = {**params, "fill_value": fill.real}
    re = _p("gather", operand.re, indices, **re_params)
    im = _p("gather", operand.im, indices, **_im_params(params))
    return [Pair(re, im)]


@_rule("optimization_barrier")
def _barrier(*args, **params):
    outs = _p("optimization_barrier", *flatten(args), **params)
    return _unflatten_like(outs, args)


def _unflatten_like(values, like) -> list:
    """``values`` (flat) regrouped as ``like``: two for each Pair of ``like``."""
    it = iter(values)
    return [Pair(next(it), next(it)) if type(a) is Pair else next(it) for a in like]


@_rule("dot_general")
def _dot_general(lhs, rhs, *, preferred_element_type=None, **params):
    pref = preferred_element_type
    if pref is not None:
        pref = dtypes.real_dtype(pref)

    def dot(a, b):
        return _p("dot_general", a, b, preferred_element_type=pref, **params)

    if type(lhs) is Pair and type(rhs) is Pair:
        re = sub(dot(lhs.re, rhs.re), dot(lhs.im, rhs.im))
        im = add(dot(lhs.re, rhs.im), dot(lhs.im, rhs.re))
    elif type(lhs) is Pair:
        re, im = dot(lhs.re, rhs), dot(lhs.im, rhs)
    else:
        re, im = dot(lhs, rhs.re), dot(lhs, rhs.im)
    return [Pair(re, im)]


@_rule("conv_general_dilated")
def _conv(lhs, rhs, *, preferred_element_type=None, **params):
    # four real convolutions, as dot_general's four products
    pref = preferred_element_type
    if pref is not None:
        pref = dtypes.real_dtype(pref)

    def conv(a, b):
        return _p("conv_general_dilated", a, b, preferred_element_type=pref, **params)

    if type(lhs) is Pair and type(rhs) is Pair:
        re = sub(conv(lhs.re, rhs.re), conv(lhs.im, rhs.im))
        im = add(conv(lhs.re, rhs.im), conv(lhs.im, rhs.re))
    elif type(lhs) is Pair:
        re, im = conv(lhs.re, rhs), conv(lhs.im, rhs)
    else:
        re, im = conv(lhs, rhs.re), conv(lhs, rhs.im)
    return [Pair(re, im)]


# -- reductions and cumulative operations ------------------------------------------------------


def _tree_reduce(fn, z: Pair, axes, identity: complex):
    """``fn`` (associative, on Pairs) folded over ``axes``: the reduced axes are flattened into
    a last axis, ``identity`` put in front, and halves combined until one element is left (the
    tree of the eager impl)."""
    shape = z.re.shape
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = tuple(kept) + tuple(axes)
    out_shape = tuple(shape[d] for d in kept)
    n = math.prod(shape[d] for d in axes)

    def prep(x, ident):
        x = _p("transpose", x, permutation=perm) if perm != tuple(range(len(shape))) else x
        x = _p("reshape", x, new_sizes=out_shape + (n,), dimensions=None)
        head = broadcast(constant(ident, x.dtype), out_shape + (1,))
        return _p("concatenate", head, x, dimension=len(out_shape))

    flat = Pair(prep(z.re, identity.real), prep(z.im, identity.imag))
    length = n + 1
    last = len(out_shape)

    def cut(x, start, stop):
        return _p(
            "slice",
            x,
            start_indices=(0,) * last + (start,),
            limit_indices=out_shape + (stop,),
            strides=None,
        )

    def cut_pair(p, start, stop):
        return Pair(cut(p.re, start, stop), cut(p.im, start, stop))

    while length > 1:
        h = length // 2
        half = fn(cut_pair(flat, 0, h), cut_pair(flat, h, 2 * h))
        if length % 2:
            rest = cut_pair(flat, 2 * h, length)
            half = Pair(
                _p("concatenate", half.re, rest.re, dimension=last),
                _p("concatenate", half.im, rest.im, dimension=last),
            )
        flat = half
        length = half.re.shape[-1]
    return Pair(*(_p("reshape", p, new_sizes=out_shape, dimensions=None) for p in flat))


@_rule("reduce_prod")
def _reduce_prod(x, *, axes, **_):
    return [_tree_reduce(cmul, x, axes, 1 + 0j)]


@_rule("reduce_max")
def _reduce_max(x, *, axes, **_):
    return [_tree_reduce(cmax, x, axes, complex(-math.inf, 0))]


@_rule("reduce_min")
def _reduce_min(x, *, axes, **_):
    return [_tree_reduce(cmin, x, axes, complex(math.inf, 0))]


def _doubling(fn, z: Pair, axis: int, reverse: bool):
    """The inclusive scan of ``fn`` along ``axis``: ``ceil(log2 n)`` whole-array steps, as the
    eager impl (``out[s:] = fn(out[s:], out[:-s])``)."""
    shape = z.re.shape
    n = shape[axis]
    nd = len(shape)

    def cut(x, start, stop):
        lo = [0] * nd
        hi = list(x.shape)
        lo[axis], hi[axis] = start, stop
        return _p("slice", x, start_indices=tuple(lo), limit_indices=tuple(hi), strides=None)

    if reverse:
        z = Pair(_p("rev", z.re, dimensions=(axis,)), _p("rev", z.im, dimensions=(axis,)))
    s = 1
    while s < n:
        head = Pair(cut(z.re, 0, s), cut(z.im, 0, s))
        tail = fn(
            Pair(cut(z.re, s, n), cut(z.im, s, n)), Pair(cut(z.re, 0, n - s), cut(z.im, 0, n - s))
        )
        z = Pair(
            _p("concatenate", head.re, tail.re, dimension=axis),
            _p("concatenate", head.im, tail.im, dimension=axis),
        )
        s *= 2
    if reverse:
        z = Pair(_p("rev", z.re, dimensions=(axis,)), _p("rev", z.im, dimensions=(axis,)))
    return z


def _cumulative(fn):
    def rule(x, *, axis, reverse=False, **_):
        return [_doubling(fn, x, axis, reverse)]

    return rule


_BUILTIN["cumprod"] = _cumulative(cmul)
_BUILTIN["cummax"] = _cumulative(cmax)
_BUILTIN["cummin"] = _cumulative(cmin)
_BUILTIN["cumlogsumexp"] = _cumulative(clogaddexp)


@_rule("sort")
def _sort(*operands, num_keys, **params):
    keys, rest = operands[:num_keys], operands[num_keys:]
    flat_keys, flat_rest = flatten(keys), flatten(rest)
    outs = _p("sort", *flat_keys, *flat_rest, num_keys=len(flat_keys), **params)
    return _unflatten_like(outs, operands)


# -- control flow and calls --------------------------------------------------------------------


@_rule("cond")
def _cond(index, *ops, branches, **params):
    new = tuple(split_closed(b) for b in branches)
    outs = _p("cond", index, *flatten(ops), branches=new, **params)
    return unflatten(outs, branches[0].out_avals)


@_rule("while")
def _while(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **params):
    cc = args[:cond_nconsts]
    bc = args[cond_nconsts : cond_nconsts + body_nconsts]
    carry = args[cond_nconsts + body_nconsts :]
    outs = _p(
        "while",
        *flatten(cc),
        *flatten(bc),
        *flatten(carry),
        cond_jaxpr=split_closed(cond_jaxpr),
        body_jaxpr=split_closed(body_jaxpr),
        cond_nconsts=len(flatten(cc)),
        body_nconsts=len(flatten(bc)),
        **params,
    )
    return unflatten(outs, body_jaxpr.out_avals)


@_rule("scan")
def _scan(*args, jaxpr, num_consts, num_carry, linear, **params):
    consts = args[:num_consts]
    carry = args[num_consts : num_consts + num_carry]
    xs = args[num_consts + num_carry :]
    new_linear = tuple(
        flag for a, flag in zip(args, linear) for _ in range(2 if type(a) is Pair else 1)
    )
    outs = _p(
        "scan",
        *flatten(consts),
        *flatten(carry),
        *flatten(xs),
        jaxpr=split_closed(jaxpr),
        num_consts=len(flatten(consts)),
        num_carry=len(flatten(carry)),
        linear=new_linear,
        **params,
    )
    return unflatten(outs, jaxpr.out_avals)


def _call(body_param: str):
    def rule(*args, **params):
        body = params[body_param]
        if type(body) is not core.ClosedJaxpr or len(body.jaxpr.invars) != len(args):
            raise LoweringError(
                f"complex split: cannot inline this call (its {body_param} does not take the "
                "call's operands)"
            )
        return inline_closed(body, args)

    return rule


_BUILTIN["jit"] = _call("jaxpr")
_BUILTIN["checkpoint"] = _call("jaxpr")
_BUILTIN["custom_jvp_call"] = _call("call_jaxpr")
_BUILTIN["custom_vjp_call"] = _call("call_jaxpr")


@_rule("linear_solve")
def _linear_solve(*args, const_lengths, jaxprs, **_):
    i = sum(const_lengths[:2])
    solve_consts = args[i : i + const_lengths[2]]
    b = args[sum(const_lengths) :]
    return inline_closed(jaxprs[2], [*solve_consts, *b])


# -- host callbacks ----------------------------------------------------------------------------


class _PlanarCallback:
    """A host callback of complex values, called by the compiled program with their real and
    imaginary parts: it puts each complex argument back together (exactly, signed zeros and
    NaNs included), calls the user's callback and splits its complex results the same way."""

    __slots__ = ("inner", "in_complex", "result_avals", "name")

    def __init__(self, inner, args, result_avals):
        self.inner = inner
        self.in_complex = tuple(type(a) is Pair for a in args)
        self.result_avals = tuple(result_avals)
        self.name = getattr(inner, "name", "callback")

    def __call__(self, *flat):
        it = iter(flat)
        args = []
        for is_complex in self.in_complex:
            if not is_complex:
                args.append(next(it))
                continue
            re, im = np.asarray(next(it)), np.asarray(next(it))
            z = np.empty(re.shape, dtypes.complex_dtype(re.dtype))
            z.real, z.imag = re, im
            args.append(Array(z))
        out = self.inner(*args)
        if not self.result_avals:
            return out
        res = []
        for leaf, aval in zip(tree_util.tree_leaves(out), self.result_avals):
            if aval.dtype.kind == "c":
                v = np.asarray(leaf, aval.dtype)
                res += [np.ascontiguousarray(v.real), np.ascontiguousarray(v.imag)]
            else:
                res.append(leaf)
        return res

    def __repr__(self):
        return f"<callback {self.name} of complex values>"


def _real_avals(avals) -> tuple:
    out = []
    for a in avals:
        if a.dtype.kind == "c":
            ra = ShapedArray(a.shape, dtypes.real_dtype(a.dtype), a.weak_type)
            out += [ra, ra]
        else:
            out.append(a)
    return tuple(out)


def _callback(name: str):
    def rule(*args, callback, **params):
        result_avals = params.get("result_avals", ())
        if "result_avals" in params:
            params = {**params, "result_avals": _real_avals(result_avals)}
        wrapper = _PlanarCallback(callback, args, result_avals)
        outs = _p(name, *flatten(args), callback=wrapper, **params)
        return unflatten(outs, result_avals)

    return rule


for _name in ("debug_callback", "pure_callback", "io_callback"):
    _BUILTIN[_name] = _callback(_name)


@_rule("iota")
def _iota(*, dtype, shape, dimension):
    # a complex iota: the counts as the real part, a zero imaginary part
    real = dtypes.real_dtype(dtype)
    re = _p("iota", dtype=real, shape=shape, dimension=dimension)
    return [Pair(re, broadcast(constant(0.0, real), shape))]
