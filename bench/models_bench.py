"""Model training steps of issue 21: fungrad's jitted step against JAX's, in the same process.

Each workload is one jitted function ``step(params, opt_state, batch) -> (params, opt_state,
loss)`` on float32: ``value_and_grad`` of the loss, then an SGD update (``p - lr g``, an empty
optimizer state) or, for ``digits_adam``, a hand-written Adam (plain ``tree_map`` formulas, as a
new user writes it; not ``fungrad.optim.adam`` nor optax). The math is written once, against
``fw`` (``fungrad`` or ``jax``), so both sides run the same program:

- ``cnn``: 28x28x1 images, batch 64; 3x3 conv (16 channels, SAME) + bias, relu, 2x2 max pool
  (stride 2); 3x3 conv (32 channels, SAME) + bias, relu, 2x2 max pool; dense 1568 -> 10;
  softmax cross-entropy; SGD. NHWC / HWIO, ``lax.conv_general_dilated`` and
  ``lax.reduce_window`` (max) on both sides.
- ``transformer``: one pre-LN block, batch 8, sequence 128, width 256, 4 heads, MLP 1024 with
  gelu (tanh approximation); causal softmax attention (masked scores set to -inf); layer norm
  with eps 1e-5; loss the mean square of the block's output; SGD.
- ``lstm``: ``lax.scan`` over T=64 steps, batch 32, input 64, hidden 256; the four gates from
  one fused matmul ``[x, h] @ W`` (4H columns) plus bias, sliced into i, f, g, o; loss the mean
  square of (last hidden - a target); SGD.
- ``mlp_small``: relu MLP 64-128-128-10, batch 128, softmax cross-entropy, SGD.
- ``digits_adam``: relu MLP 64-128-10, batch 128, softmax cross-entropy, hand-written Adam.
- ``w4``: relu MLP 784-512-512-10, batch 128, softmax cross-entropy, SGD.

Check before timing: both frameworks take one float32 step (jitted) from the same parameters
and batch; their loss, gradients (a jitted ``value_and_grad``) and new parameters are compared
with a float64 reference of the same step. The reference is JAX's step under
``jax.enable_x64`` on float64 copies of the inputs when JAX is installed, else fungrad's step
run eagerly (no jit, numpy kernels) under ``fungrad.enable_x64``. Errors are normwise per
array (``max |got - ref| / max |ref|``); a result over the tolerance is reported, never timed.

Reported per workload: wall time per step (min and median of alternating batches, bench/common
``timeit_interleaved``, the step fed its own previous output as a training loop), process CPU
time per step, the fungrad/JAX ratios, the issue's target and whether it is met; the planned
temporaries of the compiled step (``jit(step).lower(*args).compile().memory_analysis()
.temp_size_in_bytes`` on both sides); and (not with ``--no-first-call``) the first call (trace
+ compile + run) of the step in a fresh process per framework and workload, on-disk compilation
caches of programs off (``FUNGRAD_DISABLE_CACHE=1``, JAX's persistent cache off), import time
excluded. fungrad's own libraries (the matrix product, thread pool, FFTs: fixed code that JAX
ships prebuilt in jaxlib) stay in fungrad's cache, filled by an unmeasured first child as an
install would; with them compiled in the measured process too (``FUNGRAD_DISABLE_CACHE=all``)
a first call costs ~55 ms more (the matrix-product library).

Run:  PYTHONPATH=. /path/to/jax-venv/bin/python bench/models_bench.py [--only cnn,lstm]
      [--cores 1,0] [--quick] [--no-first-call]
``--cores`` lists the pinnings to run, each in a fresh process (1: one core, as ``taskset -c 0``;
0: the affinity left alone). Without JAX it runs fungrad alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
from common import optional, pin_cores, timeit_interleaved  # noqa: E402

# -- the models, written once against ``fw`` (fungrad or jax) ---------------------------------


def _cross_entropy(fw, logits, y):
    """Mean softmax cross-entropy of ``logits`` against one-hot ``y``."""
    return -fw.numpy.mean(fw.numpy.sum(y * fw.nn.log_softmax(logits), axis=-1))


def mlp_loss(fw, params, batch):
    """Relu MLP, params a list of (W, b); softmax cross-entropy against one-hot labels."""
    x, y = batch
    h = x
    for w, b in params[:-1]:
        h = fw.nn.relu(h @ w + b)
    w, b = params[-1]
    return _cross_entropy(fw, h @ w + b, y)


def _max_pool(fw, x):
    lax = fw.lax
    return lax.reduce_window(x, -fw.numpy.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _conv(fw, x, w):
    return fw.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def cnn_loss(fw, params, batch):
    """conv 3x3 (16) + relu + pool, conv 3x3 (32) + relu + pool, dense to 10, cross-entropy."""
    x, y = batch
    (w1, b1), (w2, b2), (w3, b3) = params
    h = _max_pool(fw, fw.nn.relu(_conv(fw, x, w1) + b1))
    h = _max_pool(fw, fw.nn.relu(_conv(fw, h, w2) + b2))
    h = h.reshape(h.shape[0], -1)
    return _cross_entropy(fw, h @ w3 + b3, y)


def _layer_norm(fw, x, g, b, eps=1e-5):
    jnp = fw.numpy
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * fw.lax.rsqrt(var + eps) * g + b


TF_HEADS = 4


def transformer_loss(fw, params, batch):
    """Pre-LN block: x + attn(LN(x)), then h + MLP(LN(h)); loss mean(out ** 2)."""
    jnp = fw.numpy
    (x,) = batch
    b, t, d = x.shape
    hd = d // TF_HEADS
    a = _layer_norm(fw, x, params["ln1_g"], params["ln1_b"])
    qkv = a @ params["w_qkv"]
    q, k, v = (qkv[..., i * d : (i + 1) * d].reshape(b, t, TF_HEADS, hd) for i in range(3))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
    causal = jnp.tril(jnp.ones((t, t), bool))
    s = jnp.where(causal, s, -jnp.inf)
    s = s - jnp.max(s, axis=-1, keepdims=True)
    p = jnp.exp(s)
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o = jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, d)
    h = x + o @ params["w_o"]
    m = _layer_norm(fw, h, params["ln2_g"], params["ln2_b"])
    m = fw.nn.gelu(m @ params["w_1"] + params["b_1"]) @ params["w_2"] + params["b_2"]
    out = h + m
    return jnp.mean(jnp.square(out))


def lstm_loss(fw, params, batch):
    """LSTM over ``xs`` (T, B, I) by ``lax.scan``; fused gate matmul; mean((h_T - y) ** 2)."""
    jnp = fw.numpy
    xs, y = batch
    w, bias = params
    hidden = w.shape[1] // 4
    zeros = jnp.zeros((xs.shape[1], hidden), xs.dtype)

    def cell(carry, x):
        h, c = carry
        z = jnp.concatenate([x, h], axis=-1) @ w + bias
        i = fw.nn.sigmoid(z[:, :hidden])
        f = fw.nn.sigmoid(z[:, hidden : 2 * hidden])
        g = jnp.tanh(z[:, 2 * hidden : 3 * hidden])
        o = fw.nn.sigmoid(z[:, 3 * hidden :])
        c = f * c + i * g
        return (o * jnp.tanh(c), c), None

    (h, _), _ = fw.lax.scan(cell, (zeros, zeros), xs)
    return jnp.mean(jnp.square(h - y))


# -- inputs (float32 numpy) -----------------------------------------------------------------------


def _rng(seed=0):
    import numpy as np

    return np.random.default_rng(seed)


def _normal(rng, shape, scale):
    import numpy as np

    return (scale * rng.standard_normal(shape)).astype(np.float32)


def mlp_inputs(sizes, batch=128):
    import numpy as np

    rng = _rng()
    params = [
        (_normal(rng, (m, n), 1 / np.sqrt(m)), _normal(rng, (n,), 0.01))
        for m, n in zip(sizes[:-1], sizes[1:])
    ]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    return params, (x, y)


def cnn_inputs():
    import numpy as np

    rng = _rng()
    params = [
        (_normal(rng, (3, 3, 1, 16), 1 / 3), _normal(rng, (16,), 0.01)),
        (_normal(rng, (3, 3, 16, 32), 1 / 12), _normal(rng, (32,), 0.01)),
        (_normal(rng, (7 * 7 * 32, 10), 1 / np.sqrt(7 * 7 * 32)), _normal(rng, (10,), 0.01)),
    ]
    x = rng.random((64, 28, 28, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    return params, (x, y)


def transformer_inputs(batch=8, seq=128, d=256, mlp=1024):
    import numpy as np

    rng = _rng()
    params = {
        "ln1_g": np.ones(d, np.float32),
        "ln1_b": np.zeros(d, np.float32),
        "w_qkv": _normal(rng, (d, 3 * d), 1 / np.sqrt(d)),
        "w_o": _normal(rng, (d, d), 1 / np.sqrt(d)),
        "ln2_g": np.ones(d, np.float32),
        "ln2_b": np.zeros(d, np.float32),
        "w_1": _normal(rng, (d, mlp), 1 / np.sqrt(d)),
        "b_1": np.zeros(mlp, np.float32),
        "w_2": _normal(rng, (mlp, d), 1 / np.sqrt(mlp)),
        "b_2": np.zeros(d, np.float32),
    }
    return params, (rng.standard_normal((batch, seq, d)).astype(np.float32),)


def lstm_inputs(steps=64, batch=32, inp=64, hidden=256):
    import numpy as np

    rng = _rng()
    params = (
        _normal(rng, (inp + hidden, 4 * hidden), 1 / np.sqrt(inp + hidden)),
        _normal(rng, (4 * hidden,), 0.1),
    )
    xs = rng.standard_normal((steps, batch, inp)).astype(np.float32)
    y = _normal(rng, (batch, hidden), 0.5)
    return params, (xs, y)


# -- optimizers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sgd:
    lr: float
    label = "SGD"

    def init(self, fw, params):
        return ()

    def update(self, fw, params, grads, state):
        return fw.tree_util.tree_map(lambda p, g: p - self.lr * g, params, grads), state


@dataclass(frozen=True)
class HandAdam:
    """Adam as a new user writes it: tree_map formulas, bias correction by the step count."""

    lr: float = 1e-3
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    label = "Adam (by hand)"

    def init(self, fw, params):
        jnp, tm = fw.numpy, fw.tree_util.tree_map
        return (jnp.zeros((), jnp.int32), tm(jnp.zeros_like, params), tm(jnp.zeros_like, params))

    def update(self, fw, params, grads, state):
        jnp, tm = fw.numpy, fw.tree_util.tree_map
        count, mu, nu = state
        count = count + 1
        mu = tm(lambda m, g: self.b1 * m + (1 - self.b1) * g, mu, grads)
        nu = tm(lambda v, g: self.b2 * v + (1 - self.b2) * g * g, nu, grads)
        c1 = 1 - self.b1 ** count.astype(mu_dtype(fw, mu))
        c2 = 1 - self.b2 ** count.astype(mu_dtype(fw, mu))
        params = tm(
            lambda p, m, v: p - self.lr * (m / c1) / (jnp.sqrt(v / c2) + self.eps),
            params,
            mu,
            nu,
        )
        return params, (count, mu, nu)


def mu_dtype(fw, tree):
    """The dtype of the first leaf of ``tree`` (float32, or float64 for the reference)."""
    return fw.tree_util.tree_leaves(tree)[0].dtype


# -- the workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    title: str
    loss: Callable  # loss(fw, params, batch) -> scalar
    inputs: Callable  # () -> (params, batch) as float32 numpy
    opt: object
    target: float  # fungrad / JAX time, from the issue
    first_target: float | None = None  # fungrad / JAX first-call time, from the issue
    issue_ratio: str = ""  # the ratio the issue measured
    tol: float = 1e-4  # normwise float32 error allowed against the float64 step

    def step(self, fw):
        """The un-jitted training step on framework ``fw``."""

        def step(params, opt_state, batch):
            loss, grads = fw.value_and_grad(lambda p: self.loss(fw, p, batch))(params)
            params, opt_state = self.opt.update(fw, params, grads, opt_state)
            return params, opt_state, loss

        return step

    def grad(self, fw):
        """The un-jitted ``value_and_grad`` of the loss (for the gradient check)."""
        return lambda params, batch: fw.value_and_grad(lambda p: self.loss(fw, p, batch))(params)


WORKLOADS = {
    "cnn": Workload(
        "CNN 28x28x1 batch 64: conv3x3(16)+pool, conv3x3(32)+pool, dense 10, SGD",
        cnn_loss,
        cnn_inputs,
        Sgd(0.05),
        target=0.6,
        first_target=0.3,
        issue_ratio="0.83 / first 0.49",
    ),
    "transformer": Workload(
        "pre-LN transformer block, batch 8, seq 128, d 256, 4 heads, MLP 1024, causal, SGD",
        transformer_loss,
        transformer_inputs,
        Sgd(0.01),
        target=0.7,
        first_target=0.3,
        issue_ratio="0.81 / first 0.25",
    ),
    "lstm": Workload(
        "LSTM lax.scan T 64, batch 32, input 64, hidden 256, fused gates, SGD",
        lstm_loss,
        lstm_inputs,
        Sgd(0.1),
        target=0.8,
        first_target=0.3,
        issue_ratio="1.93 / first 0.68",
    ),
    "mlp_small": Workload(
        "MLP 64-128-128-10 relu, batch 128, SGD",
        mlp_loss,
        lambda: mlp_inputs((64, 128, 128, 10)),
        Sgd(0.05),
        target=0.8,
        issue_ratio="0.89",
    ),
    "digits_adam": Workload(
        "MLP 64-128-10 relu, batch 128, hand-written Adam",
        mlp_loss,
        lambda: mlp_inputs((64, 128, 10)),
        HandAdam(),
        target=0.8,
        issue_ratio="~1.7-2",
    ),
    "w4": Workload(
        "MLP 784-512-512-10 relu, batch 128, SGD",
        mlp_loss,
        lambda: mlp_inputs((784, 512, 512, 10)),
        Sgd(0.05),
        target=0.85,
        issue_ratio="0.97-1.03",
    ),
}


# -- the check against float64 ------------------------------------------------------------------


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [x for t in tree for x in _leaves(t)]
    return [tree]


def normwise_error(got, expected) -> float:
    """Largest over the arrays of two matching pytrees of ``max |got - ref| / max |ref|`` (the
    absolute error where the reference is all zeros); NaN anywhere in ``got`` is infinite."""
    import numpy as np

    worst = 0.0
    g_leaves, e_leaves = _leaves(got), _leaves(expected)
    if len(g_leaves) != len(e_leaves):
        raise ValueError(f"result has {len(g_leaves)} arrays, the reference {len(e_leaves)}")
    for g, e in zip(g_leaves, e_leaves):
        g, e = np.asarray(g, np.float64), np.asarray(e, np.float64)
        if g.shape != e.shape:
            raise ValueError(f"result shape {g.shape} != reference shape {e.shape}")
        if not np.all(np.isfinite(g)):
            return float("inf")
        if g.size == 0:
            continue
        scale = float(np.max(np.abs(e))) or 1.0
        worst = max(worst, float(np.max(np.abs(g - e))) / scale)
    return worst


def _to(fw, tree, dtype=None):
    """``tree`` of numpy arrays as ``fw`` arrays (cast to ``dtype`` when given)."""
    import numpy as np

    return fw.tree_util.tree_map(
        lambda a: fw.numpy.asarray(a if dtype is None else np.asarray(a, dtype)), tree
    )


def _numpy(tree):
    import numpy as np

    if isinstance(tree, dict):
        return {k: _numpy(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_numpy(t) for t in tree]
    return np.asarray(tree)


def reference(w: Workload, jax=None):
    """(label, (loss, grads), (new params, new opt state)) of one float64 step."""
    import numpy as np

    import fungrad as fg

    params, batch = w.inputs()
    if jax is not None:
        with jax.enable_x64(True):
            p, b = _to(jax, params, np.float64), _to(jax, batch, np.float64)
            state = w.opt.init(jax, p)
            grads = jax.jit(w.grad(jax))(p, b)
            new = jax.jit(w.step(jax))(p, state, b)
            return "JAX x64 (jit)", _numpy(grads), _numpy(new[:2])
    with fg.enable_x64(True):
        p, b = _to(fg, params, np.float64), _to(fg, batch, np.float64)
        state = w.opt.init(fg, p)
        grads = w.grad(fg)(p, b)
        new = w.step(fg)(p, state, b)
        return "fungrad x64 (eager)", _numpy(grads), _numpy(new[:2])


def prepare(fw, name: str, w: Workload, ref) -> dict:
    """A row: ``run`` (one timed training step), ``err``, ``args``; or ``error``."""
    row = {"label": name}
    try:
        params, batch = w.inputs()
        params, batch = _to(fw, params), _to(fw, batch)
        state = w.opt.init(fw, params)
        step = fw.jit(w.step(fw))
        grads = fw.jit(w.grad(fw))(params, batch)
        new = step(params, state, batch)
        _, ref_grads, ref_new = ref
        err_grad = normwise_error(_numpy(grads), ref_grads)
        err_step = normwise_error(_numpy(new[:2]), ref_new)
        row["err"] = max(err_grad, err_step) / w.tol
        if not row["err"] <= 1.0:
            row["error"] = (
                f"WRONG FIRST STEP: normwise error of the loss/gradients {err_grad:.3g}, of the "
                f"new parameters {err_step:.3g}, tolerance {w.tol:g}"
            )
            return row
        row["args"] = (params, state, batch)
        row["step"] = step
        block = fw.block_until_ready
        carry = list(new[:2])

        def run():  # a training loop: each step takes the previous one's parameters and state
            carry[0], carry[1], loss = step(carry[0], carry[1], batch)
            block(loss)

        row["run"] = run
    except Exception as e:  # noqa: BLE001 - reported in the table, the other rows still run
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return row


def temp_bytes(row) -> int | None:
    """Planned temporaries of the compiled step (``memory_analysis().temp_size_in_bytes``)."""
    try:
        compiled = row["step"].lower(*row["args"]).compile()
        return int(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:  # noqa: BLE001 - shown as '?' in the table
        return None


def cpu_times(runs, walls, rounds: int = 7, batch_s: float = 0.05) -> list[float]:
    """Process CPU seconds per call of each ``run``: the best of ``rounds`` alternating batches
    of about ``batch_s`` wall seconds (sized from ``walls``). Pinned to one core on a shared
    host this is the work a step costs, free of the time other processes hold the core."""
    counts = [max(1, int(batch_s / w)) for w in walls]
    best = [float("inf")] * len(runs)
    for _ in range(rounds):
        for i, (run, n) in enumerate(zip(runs, counts)):
            t0 = time.process_time()
            for _ in range(n):
                run()
            best[i] = min(best[i], (time.process_time() - t0) / n)
    return best


# -- first call, in a fresh process ---------------------------------------------------------------


def first_call_child(framework: str, key: str) -> dict:
    """In a fresh process: seconds of the first call (trace + compile + run) and of the second
    call of ``key``'s jitted step; the inputs are converted (the backend started) before."""
    fw = optional("fungrad" if framework == "fungrad" else "jax")
    w = WORKLOADS[key]
    params, batch = w.inputs()
    params, batch = _to(fw, params), _to(fw, batch)
    state = w.opt.init(fw, params)
    fw.block_until_ready((params, state, batch))
    t0, c0 = time.perf_counter(), time.process_time()
    step = fw.jit(w.step(fw))
    fw.block_until_ready(step(params, state, batch))
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    fw.block_until_ready(step(params, state, batch))
    return {"first": first, "first_cpu": first_cpu, "second": time.perf_counter() - t0}


_PYC_DIR = None  # the children's bytecode cache (a temporary directory, made on first use)
_WARM = False  # whether a first unmeasured child per framework has filled that cache


def _child_env() -> dict:
    """The children's environment: programs' compilation caches off (fungrad's libraries
    cached: see the module's docstring), bytecode cached in a temp dir."""
    global _PYC_DIR
    if _PYC_DIR is None:
        import atexit
        import shutil
        import tempfile

        _PYC_DIR = tempfile.mkdtemp(prefix="fungrad-models-pyc-")
        atexit.register(shutil.rmtree, _PYC_DIR, True)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = _PYC_DIR
    env["FUNGRAD_DISABLE_CACHE"] = "1"
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env.setdefault("JAX_PLATFORMS", "cpu")
    path = [HERE, os.path.dirname(HERE)] + [p for p in env.get("PYTHONPATH", "").split(":") if p]
    env["PYTHONPATH"] = ":".join(path)
    return env


def first_calls(frameworks, key: str, runs: int) -> dict:
    """{framework: [(first-call wall seconds, its process CPU seconds)] or an error string},
    ``runs`` fresh processes each, the frameworks alternating (children inherit this process's
    CPU affinity). The CPU time counts every thread (compilation threads included)."""
    global _WARM
    if not _WARM:  # unmeasured: fills the children's bytecode cache (as an install ships .pyc)
        # and fungrad's library cache (as jaxlib ships its kernels compiled)
        _WARM = True
        first_calls(frameworks, "mlp_small", 1)
    out = {name: [] for name in frameworks}
    for _ in range(runs):
        for name in frameworks:
            if isinstance(out[name], str):
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--only", key]
            proc = subprocess.run(
                cmd, env=_child_env(), capture_output=True, text=True, timeout=900
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
                out[name] = f"child exited {proc.returncode}: {' | '.join(tail)}"
                continue
            data = json.loads(lines[-1])
            out[name].append((data["first"], data["first_cpu"]))
    return out


# -- the driver -------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(WORKLOADS)}")
    p.add_argument(
        "--cores",
        default="1,0",
        help="comma-separated pinnings, each run in its own process (1: one core; "
        "0: leave the affinity alone); default 1,0",
    )
    p.add_argument("--no-first-call", action="store_true", help="skip the fresh-process runs")
    p.add_argument("--child", choices=("fungrad", "jax"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.only = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    unknown = sorted(set(args.only) - set(WORKLOADS))
    if unknown:
        p.error(f"--only: unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    args.cores = [int(c) for c in args.cores.split(",") if c]
    return args


def _mb(n) -> str:
    return "?" if n is None else f"{n / 2**20:.2f} MB"


def run_workload(key, w, frameworks, jax, timing, args) -> tuple[bool, dict]:
    """Check, time and print one workload; (failed, summary)."""
    ref = reference(w, jax)
    rows = [prepare(fw, name, w, ref) for name, fw in frameworks]
    live = [r for r in rows if "run" in r]
    for r, (best, med) in zip(live, timeit_interleaved([r["run"] for r in live], **timing)):
        r["time"], r["median"] = best, med
    for r, cpu in zip(live, cpu_times([r["run"] for r in live], [r["time"] for r in live])):
        r["cpu"] = cpu
    for r in live:
        r["temp"] = temp_bytes(r)
    print(f"\n[{key}] {w.title}\n  first step checked against {ref[0]}, tolerance {w.tol:g}")
    print(
        f"  {'framework':<10}{'min':>11}{'median':>11}{'cpu/step':>11}{'temps':>12}{'err/tol':>9}"
    )
    failed = False
    for r in rows:
        if "error" in r:
            failed = True
            print(f"  {r['label']:<10}FAILED: {r['error']}")
            continue
        print(
            f"  {r['label']:<10}{r['time'] * 1e6:>8.0f} us{r['median'] * 1e6:>8.0f} us"
            f"{r['cpu'] * 1e6:>8.0f} us{_mb(r['temp']):>12}{r['err']:>9.3f}"
        )
    summary = {"key": key, "target": w.target, "issue": w.issue_ratio}
    if "median" in rows[0]:
        summary["fg_us"] = rows[0]["median"] * 1e6
    if len(rows) == 2 and all("time" in r for r in rows):
        fg_r, jx_r = rows
        summary.update(
            ratio=fg_r["median"] / jx_r["median"],
            ratio_min=fg_r["time"] / jx_r["time"],
            ratio_cpu=fg_r["cpu"] / jx_r["cpu"],
            jax_us=jx_r["median"] * 1e6,
            mem=(fg_r["temp"], jx_r["temp"]),
        )
        met = "MET" if summary["ratio"] <= w.target else "MISS"
        print(
            f"  fungrad/JAX median {summary['ratio']:.3f} (min {summary['ratio_min']:.3f}, "
            f"cpu/step {summary['ratio_cpu']:.3f}); target <= {w.target}: {met}  "
            f"(issue: {w.issue_ratio})"
        )
    if not args.no_first_call:
        names = [name for name, _ in frameworks]
        fc = first_calls(names, key, 1 if args.quick else 3)
        parts = []
        for name in names:
            v = fc[name]
            if isinstance(v, str):
                parts.append(f"{name} FAILED: {v}")
            else:
                wall, cpu = min(t[0] for t in v), min(t[1] for t in v)
                parts.append(f"{name} {wall:.3f} s (cpu {cpu:.3f} s)")
        line = "  first call (fresh process, min): " + ", ".join(parts)
        if all(not isinstance(v, str) for v in fc.values()) and len(fc) == 2:
            fg_first, jax_first = (min(t[0] for t in fc[n]) for n in ("fungrad", "jax"))
            ratio = fg_first / jax_first
            cpu_ratio = min(t[1] for t in fc["fungrad"]) / min(t[1] for t in fc["jax"])
            summary["first"] = (fg_first, jax_first, ratio, cpu_ratio)
            if w.first_target is not None:
                met = "MET" if ratio <= w.first_target else "MISS"
                line += (
                    f"; ratio {ratio:.3f} (cpu {cpu_ratio:.3f}), target <= {w.first_target}: {met}"
                )
            else:
                line += f"; ratio {ratio:.3f} (cpu {cpu_ratio:.3f})"
        print(line)
    return failed, summary


def print_summary(summaries, cores) -> None:
    """One markdown table of every workload (the form bench/RESULTS.md keeps)."""
    print(f"\nsummary ({'one pinned core' if cores else 'unpinned'}):")
    print(
        "| workload | fungrad | JAX | fg/JAX median (min, cpu) | target | met | first call "
        "fg / JAX (ratio, cpu ratio) | temps fg / JAX |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in summaries:
        if "ratio" not in s:
            fg_text = f"{s['fg_us']:.0f} us" if "fg_us" in s else "failed"
            print(f"| {s['key']} | {fg_text} | - | - | <= {s['target']} | - | - | - |")
            continue
        first = s.get("first")
        first_text = (
            f"{first[0]:.2f} s / {first[1]:.2f} s ({first[2]:.2f}, cpu {first[3]:.2f})"
            if first
            else "-"
        )
        met = "yes" if s["ratio"] <= s["target"] else "no"
        print(
            f"| {s['key']} | {s['fg_us']:.0f} us | {s['jax_us']:.0f} us | {s['ratio']:.2f} "
            f"({s['ratio_min']:.2f}, {s['ratio_cpu']:.2f}) | <= {s['target']} | {met} | "
            f"{first_text} | {_mb(s['mem'][0])} / {_mb(s['mem'][1])} |"
        )


def run_pinned(args, cores: int) -> int:
    cpus = pin_cores(cores)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np

    import fungrad as fg

    jax = optional("jax")
    frameworks = [("fungrad", fg)] + ([("jax", jax)] if jax is not None else [])
    timing = dict(min_time=0.3, repeats=3) if args.quick else dict(min_time=1.5, repeats=7)
    print(
        f"\nmodel training steps: cpus {cpus} ({'pinned' if cores else 'unpinned'}), "
        f"numpy {np.__version__}, jax {jax.__version__ if jax else 'absent'}, timing {timing}"
    )
    failed, summaries = False, []
    for key in args.only:
        bad, summary = run_workload(key, WORKLOADS[key], frameworks, jax, timing, args)
        failed |= bad
        summaries.append(summary)
    print_summary(summaries, cores)
    return 1 if failed else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        print(json.dumps(first_call_child(args.child, args.only[0])))
        return 0
    if len(args.cores) == 1:
        return run_pinned(args, args.cores[0])
    rc = 0
    for cores in args.cores:  # each pinning in a fresh process: thread pools size at import
        cmd = [sys.executable, os.path.abspath(__file__), "--cores", str(cores)]
        cmd += ["--only", ",".join(args.only)] + ["--quick"] * args.quick
        cmd += ["--no-first-call"] * args.no_first_call
        rc |= subprocess.call(cmd)
    return rc


if __name__ == "__main__":
    sys.exit(main())
