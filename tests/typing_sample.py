"""Typed user code that mypy must accept without errors (tests/test_typing.py runs mypy on this
file, and also runs :func:`main`, so every line here is real, working fungrad code).

``assert_type`` pins the types mypy infers: a method or operator that type checkers cannot
see makes the expression ``Any`` (or an error), and assert_type reports it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax, random, tree_util
from fungrad.typing import ArrayLike, DTypeLike, Shape

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # pragma: no cover (Python 3.10 has it in typing_extensions only)

    def assert_type(value, typ, /):
        return value


def arithmetic(x: fg.Array) -> fg.Array:
    assert_type(x + 1.0, fg.Array)
    assert_type(1 + x, fg.Array)
    assert_type(x * 2, fg.Array)
    assert_type(2.0 * x - x / 3, fg.Array)
    assert_type(x // 2 + x % 3, fg.Array)
    assert_type(x**2 + 2.0**x, fg.Array)
    assert_type(-x + (+x) + abs(x), fg.Array)
    assert_type(x @ x, fg.Array)
    assert_type(x + np.float32(1.0), fg.Array)
    assert_type(x + np.ones(3, np.float32), fg.Array)
    assert_type(divmod(x, 2), tuple[fg.Array, fg.Array])
    assert_type(round(x), fg.Array)
    assert_type(x > 0, fg.Array)
    assert_type(x == x, fg.Array)
    assert_type((x > 0) & (x < 3) | ~(x == 1), fg.Array)
    assert_type(fnp.sin(x) * 2, fg.Array)
    assert_type(fnp.exp(x) + fnp.maximum(x, 0.0), fg.Array)
    assert_type(fnp.add(x, 1), fg.Array)
    assert_type(fnp.matmul(x, x), fg.Array)
    assert_type(fnp.dot(x, x), fg.Array)
    assert_type(fnp.where(x > 1, x, 0.0), fg.Array)
    assert_type(fnp.where(x > 1), tuple[fg.Array, ...])
    return (x + 1.0) * 2


def indexing_and_properties(x: fg.Array) -> fg.Array:
    assert_type(x[0], fg.Array)
    assert_type(x[1:], fg.Array)
    assert_type(x[None, ...], fg.Array)
    assert_type(x[x > 1], fg.Array)
    assert_type(x.shape, tuple[int, ...])
    assert_type(x.ndim, int)
    assert_type(x.size, int)
    assert_type(x.dtype, np.dtype)
    assert_type(x.T, fg.Array)
    assert_type(x.real, fg.Array)
    assert_type(len(x), int)
    assert_type(float(x[0]), float)
    assert_type(1.0 in x, bool)
    first: fg.Array = next(iter(x))
    return first + x.shape[0]


def methods(x: fg.Array) -> fg.Array:
    m = x.reshape(3, 1).reshape((1, 3)).reshape(-1)
    assert_type(m, fg.Array)
    assert_type(x.sum(), fg.Array)
    assert_type(x.sum(axis=0, keepdims=True), fg.Array)
    assert_type(x.mean(0) + x.max() - x.min(axis=(0,)), fg.Array)
    assert_type(x.std(ddof=1) + x.var(), fg.Array)
    assert_type(x.argmax() + x.argmin(axis=0), fg.Array)
    assert_type(x.astype(fnp.int32), fg.Array)
    assert_type(x.astype("float32"), fg.Array)
    assert_type(x.clip(0.0, 2.0).round(1), fg.Array)
    assert_type(x.cumsum().transpose().flatten().ravel(), fg.Array)
    assert_type(x.sort().argsort(), fg.Array)
    assert_type(x.nonzero(), tuple[fg.Array, ...])
    assert_type(x.any(), fg.Array)
    assert_type(x[0].item(), Any)
    assert_type(x.block_until_ready(), fg.Array)
    return x.dot(x) + x.take(fnp.asarray([0, 1])).sum()


def updates(x: fg.Array) -> fg.Array:
    y = x.at[0].set(1.0)
    assert_type(y, fg.Array)
    assert_type(x.at[1:].add(2.0, mode="drop"), fg.Array)
    assert_type(x.at[fnp.asarray([0, 0])].multiply(3.0), fg.Array)
    assert_type(x.at[0].get(), fg.Array)
    return y.at[-1].max(10.0).at[0].min(-1.0)


def normalize(x: ArrayLike, dtype: DTypeLike = fnp.float32) -> fg.Array:
    arr = fnp.asarray(x, dtype=dtype)
    return arr / arr.sum()


def zeros(shape: Shape) -> fg.Array:
    return fnp.zeros(tuple(shape)) + fnp.ones_like(fnp.zeros(tuple(shape)))


@fg.jit
def jitted(x: fg.Array, y: fg.Array) -> fg.Array:
    return fnp.tanh(x) * y + lax.stop_gradient(x)


@functools.partial(fg.jit, static_argnums=1)
def jitted_static(x: fg.Array, n: int) -> fg.Array:
    for _ in range(n):
        x = x * 2
    return x


def loss(params: dict[str, fg.Array], x: fg.Array) -> fg.Array:
    return ((params["w"] * x + params["b"]) ** 2).mean()


@fg.vmap
def per_row(row: fg.Array) -> fg.Array:
    assert isinstance(row, fg.Array)  # a tracer is a fg.Array, as in JAX
    return row.sum()


def transforms() -> float:
    x = fnp.arange(3.0)
    params = {"w": fnp.ones(3), "b": fnp.zeros(3)}
    grads = fg.grad(loss)(params, x)
    value, grads2 = fg.value_and_grad(loss)(params, x)
    step = tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    leaves = tree_util.tree_leaves(step)
    y, vjp_fn = fg.vjp(fnp.sin, x)
    (ct,) = vjp_fn(fnp.ones_like(y))
    primal, tangent = fg.jvp(fnp.cos, (x,), (fnp.ones(3),))
    jac = fg.jacfwd(fnp.sin)(x) + fg.jacrev(fnp.sin)(x) + fg.hessian(loss, argnums=1)(params, x)
    both = fg.vmap(lambda a, b: a * b, in_axes=(0, None))(fnp.ones((2, 3)), x)
    rows: fg.Array = per_row(fnp.ones((2, 3)))
    assert_type(rows, fg.Array)
    out = jitted(x, x) + jitted_static(x, 2) + rows.sum() + value + len(leaves) + ct + primal
    out = out + tangent + jac.sum() + both.sum()
    return float(out.sum()) + float(grads2["w"].sum())


def random_keys() -> fg.Array:
    key = random.PRNGKey(0)
    key, sub = random.split(key)
    keys = random.split(random.key(1), 4)
    assert_type(keys, fg.Array)
    noise = random.normal(sub, (3,)) + random.uniform(key, (3,), minval=-1.0, maxval=1.0)
    return noise + random.randint(keys[0], (3,), 0, 10) + random.bernoulli(key, 0.5, (3,))


def main() -> None:
    x = fnp.asarray([1.0, 2.0, 3.0])
    for f in (arithmetic, indexing_and_properties, methods, updates, normalize):
        out = f(x)
        assert isinstance(out, fg.Array), (f, type(out))
    assert zeros((2,)).shape == (2,)
    assert isinstance(transforms(), float)
    assert random_keys().shape == (3,)
