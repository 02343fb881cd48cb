"""fungrad quick start: eager arrays with JAX semantics, tracing to a jaxpr, grad, jacobians,
vmap and per-example gradients, control flow, pytrees, random, and jit (native code through
LLVM).

Run with `python3 dev.py demo`.
"""

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax, random, tree_util


def main():
    # Eager arrays: float32 by default, JAX's promotion (Python scalars are weak).
    x = fnp.linspace(0.0, 1.0, 5)
    y = fnp.tanh(x) @ fnp.ones((5, 3))
    print("tanh(x) @ ones:", y)
    print("x * 2.0 keeps", (x * 2.0).dtype, "| int32 array + 1 stays", (fnp.arange(3) + 1).dtype)

    # Tracing: any function of arrays becomes a jaxpr, the IR every transform rewrites.
    def f(x):
        return fnp.sum(fnp.sin(x) * 2.0)

    jaxpr = fg.make_jaxpr(f)(x)
    print("\nmake_jaxpr(f):")
    print(jaxpr)
    (value,) = jaxpr(x)  # evaluating the jaxpr gives f's value
    assert np.allclose(np.asarray(value), np.asarray(f(x)))

    # Immutable arrays, functional updates, JAX's indexing rules.
    a = fnp.zeros(5).at[1:3].set(7.0).at[fnp.array([0, 0])].add(1.0)
    print("\nzeros(5).at[1:3].set(7).at[[0, 0]].add(1):", a)

    # Pytrees: nested containers of arrays.
    params = {"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}
    scaled = tree_util.tree_map(lambda p: p * 0.5, params)
    print("pytree leaves:", [leaf.shape for leaf in tree_util.tree_leaves(scaled)])

    # Random: explicit keys (threefry2x32), equal keys give equal samples.
    key = random.PRNGKey(0)
    k1, k2 = random.split(key)
    print("normal samples:", random.normal(k1, (3,)))
    assert np.array_equal(np.asarray(random.normal(k1, (3,))), np.asarray(random.normal(k1, (3,))))

    # grad: derivatives of Python functions, to any order.
    print("\ngrad(sin)(0.5) =", fg.grad(fnp.sin)(0.5), "| d2/dx2 =", fg.grad(fg.grad(fnp.sin))(0.5))

    def loss(w, x, y):
        return fnp.mean((fnp.tanh(x @ w) - y) ** 2)

    rng = np.random.default_rng(0)
    w = fnp.asarray(rng.standard_normal((3, 2)))
    xs = fnp.asarray(rng.standard_normal((8, 3)))
    ys = fnp.asarray(rng.standard_normal((8, 2)))
    value, g = fg.value_and_grad(loss)(w, xs, ys)
    print("loss", value, "grad shape", g.shape)
    print("make_jaxpr(grad(loss)):")
    print(fg.make_jaxpr(fg.grad(loss))(w, xs, ys))

    # Jacobians: forward and reverse mode agree.
    def f(v):
        return fnp.sin(v) * v[::-1]

    v = fnp.arange(3.0)
    print("\njacfwd(f)(v) =\n", fg.jacfwd(f)(v))
    assert np.allclose(np.asarray(fg.jacfwd(f)(v)), np.asarray(fg.jacrev(f)(v)), atol=1e-6)

    # vmap: per-example gradients without a Python loop.
    per_example = fg.vmap(fg.grad(loss), in_axes=(None, 0, 0))(w, xs[:, None], ys[:, None])
    print("per-example gradients:", per_example.shape)

    # Control flow that transforms: a scan is differentiable and batchable.
    def power_sum(x):
        return lax.scan(lambda c, _: (c * x, c), 1.0, None, length=4)[1].sum()

    print("d/dx (1 + x + x^2 + x^3) at 2:", fg.grad(power_sum)(2.0))

    # lax: the primitives themselves, with their jaxpr names.
    m = fnp.arange(12.0).reshape(3, 4)
    out = lax.dot_general(m, m, (((1,), (1,)), ((), ())))
    print("\nlax.dot_general(m, m^T):\n", out)
    print(fg.make_jaxpr(fg.nn.softmax)(m))

    # jit: a whole training step compiled to one native function (fused loops, BLAS matmul).
    @fg.jit
    def sgd_step(w, x, y):
        value, g = fg.value_and_grad(loss)(w, x, y)
        return w - 0.5 * g, value

    w32 = fnp.asarray(w, dtype=fnp.float32)
    for i in range(30):
        w32, value = sgd_step(w32, xs, ys)
        if i % 10 == 0:
            print(f"jit step {i}: loss {float(value):.4f}")
    eager_value = loss(w32, xs, ys)
    assert np.allclose(float(sgd_step(w32, xs, ys)[1]), float(eager_value), rtol=1e-5)
    print("the compiled step's fusion plan:")
    text = sgd_step.lower(w32, xs, ys).as_text()
    print(text[text.index("# fusion plan") : text.index("# LLVM IR")].rstrip())


if __name__ == "__main__":
    main()
