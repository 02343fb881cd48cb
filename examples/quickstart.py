"""fungrad quick start: eager arrays with JAX semantics, tracing to a jaxpr, pytrees, random.

Run with `python3 dev.py demo`. Transforms (grad, vmap, jit) join this example as they land.
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

    # lax: the primitives themselves, with their jaxpr names.
    w = fnp.arange(12.0).reshape(3, 4)
    out = lax.dot_general(w, w, (((1,), (1,)), ((), ())))
    print("\nlax.dot_general(w, w^T):\n", out)
    print(fg.make_jaxpr(fg.nn.softmax)(w))


if __name__ == "__main__":
    main()
