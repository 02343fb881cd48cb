"""``python -m fungrad.compat script.py`` runs JAX programs on fungrad (fungrad/compat).

Small JAX programs run through the runner in a subprocess; they check their numbers against
numpy inside (a loop for vmap, the closed form for gradients, eager for jit) and print what the
test then asserts. Missing names and modules must fail with an error that says fungrad does not
provide them.
"""

import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import fungrad
import fungrad.compat as compat
import fungrad.numpy as fnp

PORTING = "(running JAX code through fungrad.compat); see docs/porting.md"


def run_script(tmp_path, source, *args, name="prog.py", cwd=None):
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "fungrad.compat", str(script), *args],
        capture_output=True,
        text=True,
        cwd=cwd or tmp_path,
        timeout=120,
    )


def test_runs_a_jax_training_program(tmp_path):
    # Linear regression by gradient descent, written against JAX's API; the result must be
    # numpy's least-squares solution.
    r = run_script(
        tmp_path,
        """
        import jax
        import jax.numpy as jnp
        from jax import grad, jit, value_and_grad

        def loss(params, x, y):
            pred = x @ params["w"] + params["b"]
            return jnp.mean((pred - y) ** 2)

        @jit
        def step(params, x, y):
            l, g = value_and_grad(loss)(params, x, y)
            return jax.tree_util.tree_map(lambda p, d: p - 0.3 * d, params, g), l

        key = jax.random.PRNGKey(0)
        kx, kn = jax.random.split(key)
        x = jax.random.normal(kx, (64, 3))
        y = x @ jnp.array([1.5, -2.0, 0.5]) + 0.25 + 0.01 * jax.random.normal(kn, (64,))
        params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
        for _ in range(300):
            params, l = step(params, x, y)
        print(*[float(v) for v in params["w"]], float(params["b"]))
        import numpy as np
        np.save("xy.npy", np.concatenate([np.asarray(x), np.asarray(y)[:, None]], axis=1))
    """,
    )
    assert r.returncode == 0, r.stderr
    got = np.array([float(v) for v in r.stdout.split()])
    xy = np.load(tmp_path / "xy.npy").astype(np.float64)
    a = np.concatenate([xy[:, :3], np.ones((64, 1))], axis=1)
    want = np.linalg.lstsq(a, xy[:, 3], rcond=None)[0]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_import_forms_and_transforms(tmp_path):
    r = run_script(
        tmp_path,
        """
        import jax
        # fungrad/__init__ does not import fungrad.test_util: the proxy imports it on first use.
        assert callable(jax.test_util.check_grads)
        import numpy as np
        import jax.numpy as jnp
        from jax import numpy as jnp2, lax, random, nn, grad, jit, vmap
        import jax.scipy.special as jss
        from jax.scipy.special import erf
        from jax.test_util import check_grads
        import fungrad

        assert jnp is jnp2 and jnp is jax.numpy and jax.lax is lax
        assert jnp.sum is fungrad.numpy.sum and jax.grad is fungrad.grad
        assert isinstance(jnp.ones(2), jax.Array)
        x = np.linspace(-1.0, 2.0, 7, dtype=np.float32)
        f = lambda v: jnp.sum(jnp.sin(v) ** 2)
        np.testing.assert_allclose(grad(f)(x), 2 * np.sin(x) * np.cos(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(jit(f)(x), f(x), rtol=1e-6)
        np.testing.assert_allclose(vmap(lambda v: lax.mul(v, v))(x), [v * v for v in x])
        np.testing.assert_allclose(jss.erf(x), erf(x))
        np.testing.assert_allclose(nn.relu(x), np.maximum(x, 0))
        check_grads(f, (x,), order=1)
        key = random.PRNGKey(0)
        np.testing.assert_array_equal(random.normal(key, (3,)),
                                      fungrad.random.normal(fungrad.random.PRNGKey(0), (3,)))
        assert jax.tree_util.tree_leaves({"a": 1, "b": (2, 3)}) == [1, 2, 3]
        from jax.numpy import *  # noqa: F403  (jnp's __all__ through the proxy)
        print("ok", repr(jnp))
    """,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok <module 'jax.numpy' (fungrad.compat: fungrad.numpy)>")


def test_per_example_gradients_program(tmp_path):
    # The per-example gradient program from JAX's README: vmap against a loop, jit against
    # eager, the gradient against central differences.
    r = run_script(
        tmp_path,
        """
        import numpy as np
        import jax.numpy as jnp
        from jax import grad, jit, vmap, random

        def predict(params, inputs):
            for W, b in params:
                outputs = jnp.dot(inputs, W) + b
                inputs = jnp.tanh(outputs)
            return outputs

        def loss(params, inputs, targets):
            return jnp.sum((predict(params, inputs) - targets) ** 2)

        keys = random.split(random.PRNGKey(1), 5)
        params = [(random.normal(keys[0], (3, 4)), random.normal(keys[1], (4,))),
                  (random.normal(keys[2], (4, 2)), random.normal(keys[3], (2,)))]
        xs = random.normal(keys[4], (6, 3))
        ys = jnp.ones((6, 2))
        grad_loss = jit(grad(loss))
        perex = jit(vmap(grad_loss, in_axes=(None, 0, 0)))(params, xs, ys)
        for i in range(6):
            eager = grad(loss)(params, xs[i], ys[i])
            for (gw, gb), (ew, eb) in zip(perex, eager):
                np.testing.assert_allclose(gw[i], ew, rtol=2e-5, atol=2e-5)
                np.testing.assert_allclose(gb[i], eb, rtol=2e-5, atol=2e-5)
        # d loss / d b2[0] by central differences in float64 numpy
        p64 = [(np.asarray(W, np.float64), np.asarray(b, np.float64)) for W, b in params]
        def loss64(b20):
            h = np.tanh(np.asarray(xs[0], np.float64) @ p64[0][0] + p64[0][1])
            b2 = p64[1][1].copy(); b2[0] = b20
            return np.sum((h @ p64[1][0] + b2 - 1.0) ** 2)
        e = 1e-6
        fd = (loss64(p64[1][1][0] + e) - loss64(p64[1][1][0] - e)) / (2 * e)
        np.testing.assert_allclose(perex[1][1][0, 0], fd, rtol=1e-4)
        print("ok")
    """,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_variational_inference_gives_jax_numbers(tmp_path):
    # Reparameterised VI for a Bayesian logistic regression: data, noise and Monte Carlo samples
    # all come from keys, so fungrad must reproduce JAX 0.10.2's run of this very script
    # (numbers below, printed by /tmp/jaxvenv's jax) to float32 rounding.
    r = run_script(
        tmp_path,
        """
        import jax
        import jax.numpy as jnp
        from jax import random
        from jax.scipy.stats import norm

        kx, kn, kq = random.split(random.PRNGKey(3), 3)
        X = random.normal(kx, (40, 2))
        y = (X @ jnp.array([1.5, -1.0]) + 0.3 * random.normal(kn, (40,)) > 0).astype(jnp.float32)

        def log_joint(w):
            z = X @ w
            return (jnp.sum(norm.logpdf(w))
                    + jnp.sum(y * jax.nn.log_sigmoid(z) + (1 - y) * jax.nn.log_sigmoid(-z)))

        def neg_elbo(q, key):
            mu, log_sigma = q
            w = mu + jnp.exp(log_sigma) * random.normal(key, (16, 2))
            return -(jnp.mean(jax.vmap(log_joint)(w)) + jnp.sum(log_sigma))

        @jax.jit
        def step(q, key):
            loss, g = jax.value_and_grad(neg_elbo)(q, key)
            return jax.tree_util.tree_map(lambda p, d: p - 0.02 * d, q, g), loss

        q = (jnp.zeros(2), jnp.zeros(2))
        for t in range(60):
            q, loss = step(q, random.fold_in(kq, t))
        print(float(loss), *[float(v) for v in q[0]], *[float(v) for v in q[1]])
    """,
    )
    assert r.returncode == 0, r.stderr
    jax_numbers = [
        18.16939926147461,
        1.8832337856292725,
        -1.6256450414657593,
        -0.8117448687553406,
        -0.8712968230247498,
    ]
    np.testing.assert_allclose([float(v) for v in r.stdout.split()], jax_numbers, rtol=2e-5)


def test_config_update_enables_x64(tmp_path):
    r = run_script(
        tmp_path,
        """
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from jax import config
        print(jnp.arange(3.0).dtype, config is jax.config)
    """,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["float64", "True"]


def test_runs_like_python_script(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.py").write_text("VALUE = 41\n")
    r = run_script(
        tmp_path,
        """
        import sys
        from helper import VALUE  # found because the script's folder is sys.path[0]
        print(__name__, sys.argv[1:], VALUE + 1)
        sys.exit(3)
    """,
        "a",
        "--b",
        name="sub/prog.py",
        cwd=tmp_path,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout.split() == ["__main__", "['a',", "'--b']", "42"]


def test_script_errors_propagate(tmp_path):
    r = run_script(tmp_path, "raise ValueError('boom from the script')\n")
    assert r.returncode == 1
    assert "ValueError: boom from the script" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "fungrad.compat", str(tmp_path / "nope.py")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "can't open file" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fungrad.compat"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: python -m fungrad.compat" in r.stderr


def test_module_form(tmp_path):
    (tmp_path / "jaxprog.py").write_text(
        "import sys, jax.numpy as jnp\nprint(__name__, sys.argv[1:], int(jnp.sum(jnp.ones(4))))\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "fungrad.compat", "-m", "jaxprog", "x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["__main__", "['x']", "4"]


def test_missing_names_say_fungrad_lacks_them(tmp_path):
    r = run_script(
        tmp_path,
        """
        import jax, jax.numpy as jnp

        def err(f):
            try:
                f()
            except Exception as e:
                return f"{type(e).__name__}: {e}"
            return "no error"

        def from_import(stmt):
            def f():
                exec(stmt, {})
            return f

        print(err(lambda: jnp.not_a_jax_name))
        print(err(from_import("from jax.numpy import not_a_jax_name")))
        print(err(from_import("from jax.random import not_a_jax_name")))
        print(err(from_import("import jax.no_such_module")))
        print(err(from_import("import jax.config")))
        print(err(from_import("import jaxlib")))
        print(hasattr(jax, "not_a_jax_name"), hasattr(jnp, "sum"))
        jnp.not_a_jax_name  # uncaught: the traceback ends with the message
    """,
    )
    lines = r.stdout.splitlines()
    assert lines[0] == (
        f"AttributeError: jax.numpy.not_a_jax_name is not provided by fungrad {PORTING}"
    )
    assert lines[1] == (
        f"ModuleNotFoundError: jax.numpy.not_a_jax_name is not provided by fungrad {PORTING}"
    )
    assert lines[2] == (
        f"ModuleNotFoundError: jax.random.not_a_jax_name is not provided by fungrad {PORTING}"
    )
    assert lines[3] == (
        f"ModuleNotFoundError: jax.no_such_module is not provided by fungrad {PORTING}"
    )
    assert lines[4].startswith("ModuleNotFoundError: jax.config is not a module")
    assert lines[5].startswith(f"ModuleNotFoundError: jaxlib is not provided by fungrad {PORTING}")
    assert lines[6] == "False True"
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"AttributeError: jax.numpy.not_a_jax_name is not provided by fungrad {PORTING}"
    )


def test_enable_disable_in_process():
    assert "jax" not in sys.modules or isinstance(sys.modules["jax"], compat._JaxModule)
    compat.enable()
    try:
        compat.enable()  # idempotent
        assert compat.enabled()
        import jax
        import jax.numpy as jnp
        from jax import lax

        assert jnp.add is fnp.add and lax.add is fungrad.lax.add
        assert jnp.add(jnp.ones(2), 1).tolist() == [2.0, 2.0]
        assert "sum" in dir(jnp)
        with pytest.raises(AttributeError, match="jax.numpy.nope is not provided by fungrad"):
            jnp.nope  # noqa: B018
        with pytest.raises(ModuleNotFoundError, match="jax.export is not provided"):
            import jax.export  # noqa: F401
        import jax.sharding

        assert jax.sharding.PartitionSpec is fungrad.sharding.PartitionSpec
        # the JAX release whose API fungrad follows: libraries pick their code paths by it
        assert jax.__version__ == "0.10.2" and jax.__version_info__ == (0, 10, 2)
        import jax.version

        assert jax.version.__version_info__ == (0, 10, 2)
        # private modules that libraries import: mapped where fungrad has a counterpart
        from jax._src import core as src_core
        from jax._src import dtypes as src_dtypes
        from jax._src import traceback_util

        assert src_core.ShapedArray is fungrad.core.ShapedArray
        assert issubclass(src_dtypes.ExtendedDType, object) and src_dtypes.DType is np.dtype
        assert traceback_util.api_boundary(len) is len
        with pytest.raises(ModuleNotFoundError, match="jax._src.pjit is not provided"):
            import jax._src.pjit  # noqa: F401
    finally:
        compat.disable()
    assert not compat.enabled() and "jax" not in sys.modules and "jax.numpy" not in sys.modules
    assert jnp.sum(jnp.ones(3)) == 3  # objects already bound keep working


def test_new_fungrad_modules_are_found(monkeypatch):
    # A module fungrad gains (here a stand-in registered by the test) is found under jax.
    mod = types.ModuleType("fungrad.compat_probe")
    mod.answer = 42
    monkeypatch.setitem(sys.modules, "fungrad.compat_probe", mod)
    monkeypatch.setattr(fungrad, "compat_probe", mod, raising=False)
    compat.enable()
    try:
        import jax.compat_probe

        assert jax.compat_probe.answer == 42
        import jax

        assert jax.compat_probe is sys.modules["jax.compat_probe"]
        with pytest.raises(AttributeError, match="jax.compat_probe.nope is not provided"):
            jax.compat_probe.nope  # noqa: B018
    finally:
        compat.disable()


def test_enable_refuses_a_real_jax_already_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    with pytest.raises(RuntimeError, match="real jax is already imported"):
        compat.enable()
    assert not compat.enabled()


def test_fungrad_module_name():
    assert compat.fungrad_module_name("jax") == "fungrad"
    assert compat.fungrad_module_name("jax.scipy.stats.norm") == "fungrad.scipy.stats.norm"
    assert compat.fungrad_module_name("jax.test_util") == "fungrad.test_util"
    with pytest.raises(ValueError, match="not a jax module name"):
        compat.fungrad_module_name("jaxfoo")
