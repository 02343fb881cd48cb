"""Where the time of the CNN, LSTM and transformer training steps goes: their sub-programs
timed alone, fungrad against JAX in the same process (bench/models_bench.py's models and inputs).

Each sub-program is jitted on both sides and timed with alternating batches
(bench/common ``timeit_interleaved``; median wall time and best process CPU time per call).
Backward parts are timed as a ``vjp`` (forward plus the pullback, the cotangent an argument);
the backward alone is that minus the forward, shown in the ``-fwd`` column. For each fungrad
sub-program the compiled step's ``cost_analysis()`` (flops, bytes accessed), its planned
temporaries and the number of steps of its fusion plan (``as_text()``) are printed beside.

Run:  PYTHONPATH=. taskset -c 0 /path/to/jax-venv/bin/python bench/models_profile.py
      [--only cnn,lstm,transformer] [--quick] [--plan]
(``--plan``: print fungrad's fusion plans)
"""

from __future__ import annotations

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
import models_bench as M  # noqa: E402
from common import optional, timeit_interleaved  # noqa: E402


def _vjp(fw, f):
    """``(args..., ct) -> cotangents of args``: forward plus pullback, jittable."""

    def back(*args_ct):
        *args, ct = args_ct
        _, pull = fw.vjp(f, *args)
        return pull(ct)

    return back


def cnn_parts(fw):
    """[(name, function, args, forward-part name or None)] of the CNN step."""
    import numpy as np

    w = M.WORKLOADS["cnn"]
    params, batch = w.inputs()
    (w1, b1), (w2, b2), _ = params
    x = batch[0]
    rng = np.random.default_rng(1)
    c1 = rng.standard_normal((64, 28, 28, 16)).astype(np.float32)  # conv1 output
    p1 = rng.standard_normal((64, 14, 14, 16)).astype(np.float32)  # pool1 output
    c2 = rng.standard_normal((64, 14, 14, 32)).astype(np.float32)
    p2 = rng.standard_normal((64, 7, 7, 32)).astype(np.float32)
    conv = lambda a, k: M._conv(fw, a, k)  # noqa: E731
    pool = lambda a: M._max_pool(fw, a)  # noqa: E731
    loss = lambda p, b: w.loss(fw, p, b)  # noqa: E731
    to = lambda *t: M._to(fw, t)  # noqa: E731

    def no_pool_loss(p, b):  # ablation: each max pool replaced by a stride-2 subsample
        x, y = b
        (k1, c1b), (k2, c2b), (k3, c3b) = p
        h = fw.nn.relu(M._conv(fw, x, k1) + c1b)[:, ::2, ::2, :]
        h = fw.nn.relu(M._conv(fw, h, k2) + c2b)[:, ::2, ::2, :]
        h = h.reshape(h.shape[0], -1)
        return M._cross_entropy(fw, h @ k3 + c3b, y)

    def conv1_wgrad(a, k, ct):  # what the step needs of conv1: the kernel's cotangent only
        return fw.vjp(lambda k: M._conv(fw, a, k), k)[1](ct)

    return [
        ("step (value_and_grad + SGD)", w.step(fw), to(params, (), batch), None),
        ("forward (loss)", loss, to(params, batch), None),
        ("value_and_grad", w.grad(fw), to(params, batch), "forward (loss)"),
        (
            "value_and_grad, pools->slices",
            fw.value_and_grad(no_pool_loss),
            to(params, batch),
            None,
        ),  # fmt: skip
        ("conv1 fwd 28x28 1->16", conv, to(x, w1), None),
        ("conv1 vjp", _vjp(fw, conv), to(x, w1, c1), "conv1 fwd 28x28 1->16"),
        ("conv1 vjp, kernel only", conv1_wgrad, to(x, w1, c1), "conv1 fwd 28x28 1->16"),
        ("conv2 fwd 14x14 16->32", conv, to(p1, w2), None),
        ("conv2 vjp", _vjp(fw, conv), to(p1, w2, c2), "conv2 fwd 14x14 16->32"),
        ("pool1 fwd 28x28x16", pool, to(c1), None),
        ("pool1 vjp", _vjp(fw, pool), to(c1, p1), "pool1 fwd 28x28x16"),
        ("pool2 fwd 14x14x32", pool, to(c2), None),
        ("pool2 vjp", _vjp(fw, pool), to(c2, p2), "pool2 fwd 14x14x32"),
        ("bias+relu conv1 (fwd)", lambda a, b: fw.nn.relu(a + b), to(c1, b1), None),
    ]


def lstm_parts(fw):
    """[(name, function, args, forward-part name or None)] of the LSTM step."""
    import numpy as np

    w = M.WORKLOADS["lstm"]
    params, batch = w.inputs()
    wt, bias = params
    xs, _ = batch
    hidden = wt.shape[1] // 4
    rng = np.random.default_rng(1)
    h = rng.standard_normal((32, hidden)).astype(np.float32) * 0.5
    c = rng.standard_normal((32, hidden)).astype(np.float32) * 0.5
    xh = rng.standard_normal((32, 320)).astype(np.float32)
    dz = rng.standard_normal((32, 4 * hidden)).astype(np.float32)
    dz_all = rng.standard_normal((64 * 32, 4 * hidden)).astype(np.float32)
    xh_all = rng.standard_normal((64 * 32, 320)).astype(np.float32)
    jnp = fw.numpy

    def cell(wt, bias, h, c, x):  # the scan body of models_bench.lstm_loss
        z = jnp.concatenate([x, h], axis=-1) @ wt + bias
        i = fw.nn.sigmoid(z[:, :hidden])
        f = fw.nn.sigmoid(z[:, hidden : 2 * hidden])
        g = jnp.tanh(z[:, 2 * hidden : 3 * hidden])
        o = fw.nn.sigmoid(z[:, 3 * hidden :])
        c = f * c + i * g
        return o * jnp.tanh(c), c

    def gates_bwd(z, dz4):  # the four gate slices' transpose alone: dz from the 4 gate grads
        def gates(z):
            return (z[:, :hidden], z[:, hidden : 2 * hidden], z[:, 2 * hidden : 3 * hidden],
                    z[:, 3 * hidden :])  # fmt: skip

        return fw.vjp(gates, z)[1](dz4)[0]

    def split_loss(ws, b):  # ablation: four gate matmuls, no slicing of a fused product
        xs, y = b
        zeros = jnp.zeros((xs.shape[1], hidden), xs.dtype)

        def step(carry, x):
            h, c = carry
            xh = jnp.concatenate([x, h], axis=-1)
            i, f, g, o = (xh @ wk + bk for wk, bk in ws)
            c = fw.nn.sigmoid(f) * c + fw.nn.sigmoid(i) * jnp.tanh(g)
            return (fw.nn.sigmoid(o) * jnp.tanh(c), c), None

        (h, _), _ = fw.lax.scan(step, (zeros, zeros), xs)
        return jnp.mean(jnp.square(h - y))

    split = [(wt[:, k * hidden : (k + 1) * hidden], bias[k * hidden : (k + 1) * hidden])
             for k in range(4)]  # fmt: skip
    loss = lambda p, b: w.loss(fw, p, b)  # noqa: E731
    to = lambda *t: M._to(fw, t)  # noqa: E731
    z = rng.standard_normal((32, 4 * hidden)).astype(np.float32)
    dz4 = tuple(rng.standard_normal((32, hidden)).astype(np.float32) for _ in range(4))
    return [
        ("step (value_and_grad + SGD)", w.step(fw), to(params, (), batch), None),
        ("forward (loss, scan of 64)", loss, to(params, batch), None),
        ("value_and_grad", w.grad(fw), to(params, batch), "forward (loss, scan of 64)"),
        (
            "value_and_grad, 4 gate matmuls",
            fw.value_and_grad(split_loss),
            to(split, batch),
            None,
        ),  # fmt: skip
        ("cell fwd (one step)", cell, to(wt, bias, h, c, xs[0]), None),
        (
            "cell vjp (one step)",
            _vjp(fw, cell),
            to(wt, bias, h, c, xs[0], (h, c)),
            "cell fwd (one step)",
        ),  # fmt: skip
        ("gate slices vjp (one step)", gates_bwd, to(z, dz4), None),
        ("gemm [x,h]@W 32x320x1024", lambda a, b: a @ b, to(xh, wt), None),
        ("gemm dz@W.T 32x1024x320", lambda a, b: a @ b.T, to(dz, wt), None),
        ("gemm [x,h].T@dz 320x32x1024", lambda a, b: a.T @ b, to(xh, dz), None),
        ("all-steps dW 320x2048x1024", lambda a, b: a.T @ b, to(xh_all, dz_all), None),
    ]


def transformer_parts(fw):
    """[(name, function, args, forward-part name or None)] of the transformer step."""
    import numpy as np

    w = M.WORKLOADS["transformer"]
    params, batch = w.inputs()
    (x,) = batch
    b, t, d = x.shape
    heads, hd = M.TF_HEADS, d // M.TF_HEADS
    mlp = params["w_1"].shape[1]
    rng = np.random.default_rng(1)
    jnp = fw.numpy
    n = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    q, k, v = n(b, t, heads, hd), n(b, t, heads, hd), n(b, t, heads, hd)
    s = n(b, heads, t, t)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)

    def ln(x, g, bb):
        return M._layer_norm(fw, x, g, bb)

    def qkv_heads(a, wq):  # the q/k/v projection and the split into heads
        qkv = a @ wq
        return tuple(qkv[..., i * d : (i + 1) * d].reshape(b, t, heads, hd) for i in range(3))

    def softmax_scores(q, k):  # scores + causal mask + softmax
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        s = s - jnp.max(s, axis=-1, keepdims=True)
        e = jnp.exp(s)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def masked_softmax(s):  # the causal mask + softmax alone
        s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
        s = s - jnp.max(s, axis=-1, keepdims=True)
        e = jnp.exp(s)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def attend(p, v):  # attention-weighted values, heads merged
        return jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, d)

    def out_proj(o, wo, x):
        return x + o @ wo

    def mlp_block(m, w1, b1, w2, b2):
        return fw.nn.gelu(m @ w1 + b1) @ w2 + b2

    def gelu(z):
        return fw.nn.gelu(z)

    loss = lambda p, b: w.loss(fw, p, b)  # noqa: E731
    to = lambda *t: M._to(fw, t)  # noqa: E731
    g1, b1 = params["ln1_g"], params["ln1_b"]
    a = n(b, t, d)
    o = n(b, t, d)
    z = n(b, t, mlp)
    mlp_args = (a, params["w_1"], params["b_1"], params["w_2"], params["b_2"])
    return [
        ("step (value_and_grad + SGD)", w.step(fw), to(params, (), batch), None),
        ("forward (loss)", loss, to(params, batch), None),
        ("value_and_grad", w.grad(fw), to(params, batch), "forward (loss)"),
        ("layer norm fwd", ln, to(x, g1, b1), None),
        ("layer norm vjp", _vjp(fw, ln), to(x, g1, b1, x), "layer norm fwd"),
        ("qkv projection+heads fwd", qkv_heads, to(a, params["w_qkv"]), None),
        (
            "qkv projection+heads vjp",
            _vjp(fw, qkv_heads),
            to(a, params["w_qkv"], (q, k, v)),
            "qkv projection+heads fwd",
        ),  # fmt: skip
        ("scores+mask+softmax fwd", softmax_scores, to(q, k), None),
        (
            "scores+mask+softmax vjp",
            _vjp(fw, softmax_scores),
            to(q, k, p),
            "scores+mask+softmax fwd",
        ),  # fmt: skip
        ("mask+softmax fwd", masked_softmax, to(s), None),
        ("mask+softmax vjp", _vjp(fw, masked_softmax), to(s, p), "mask+softmax fwd"),
        ("attend p@v fwd", attend, to(p, v), None),
        ("attend p@v vjp", _vjp(fw, attend), to(p, v, o), "attend p@v fwd"),
        ("output projection fwd", out_proj, to(o, params["w_o"], x), None),
        (
            "output projection vjp",
            _vjp(fw, out_proj),
            to(o, params["w_o"], x, x),
            "output projection fwd",
        ),  # fmt: skip
        ("mlp+gelu fwd", mlp_block, to(*mlp_args), None),
        ("mlp+gelu vjp", _vjp(fw, mlp_block), to(*mlp_args, x), "mlp+gelu fwd"),
        ("gelu fwd 8x128x1024", gelu, to(z), None),
        ("gelu vjp", _vjp(fw, gelu), to(z, z), "gelu fwd 8x128x1024"),
        ("gemm 1024x256x1024", lambda a, b: a @ b, to(a.reshape(-1, d), params["w_1"]), None),
    ]


PARTS = {"cnn": cnn_parts, "lstm": lstm_parts, "transformer": transformer_parts}


def _fg_facts(fg, f, args) -> str:
    """cost_analysis flops / bytes, planned temporaries and plan steps of fungrad's build."""
    try:
        compiled = fg.jit(f).lower(*args).compile()
        cost = compiled.cost_analysis()
        mem = compiled.memory_analysis().temp_size_in_bytes
        text = compiled.as_text()
        plans = re.findall(r"# fusion plan of \S+: (\d+) steps", text)
        body = re.findall(r"body \((?:reversed )?length \d+\): (\d+) steps", text)
        steps = "+".join(plans) + (f" (bodies {'/'.join(body)})" if body else "")
        return (
            f"{cost['flops'] / 1e6:8.1f} MFLOP {cost['bytes accessed'] / 2**20:7.1f} MB "
            f"temps {mem / 2**20:6.2f} MB  plan {steps}"
        )
    except Exception as e:  # noqa: BLE001 - the timing row still stands
        return f"({type(e).__name__}: {str(e)[:60]})"


def profile(key, frameworks, timing, show_plan) -> None:
    built = {name: PARTS[key](fw) for name, fw in frameworks}
    fg = dict(frameworks)["fungrad"]
    names = [p[0] for p in built["fungrad"]]
    print(
        f"\n[{key}] sub-programs: process CPU us per call (best), median wall us; "
        "'bwd': CPU minus the forward part's"
    )
    head = "".join(f"{n + ' cpu':>13}{'wall':>9}{'bwd':>8}" for n, _ in frameworks)
    print(f"  {'part':<30}{head}{'fg/JAX cpu':>11}   fungrad build")
    results = {}
    for i, name in enumerate(names):
        runs = []
        for fw_name, fw in frameworks:
            _, f, args, _ = built[fw_name][i]
            jf = fw.jit(f)
            fw.block_until_ready(jf(*args))
            runs.append(lambda jf=jf, args=args, fw=fw: fw.block_until_ready(jf(*args)))
        times = timeit_interleaved(runs, **timing)
        cpus = M.cpu_times(runs, [t[0] for t in times], rounds=5)
        results[name] = [(med, cpu) for (_, med), cpu in zip(times, cpus)]
        fwd = built["fungrad"][i][3]
        cells = []
        for j, (med, cpu) in enumerate(results[name]):
            bwd = f"{(cpu - results[fwd][j][1]) * 1e6:.0f}" if fwd is not None else "-"
            cells.append(f"{cpu * 1e6:>13.0f}{med * 1e6:>9.0f}{bwd:>8}")
        pair = results[name]
        ratio = f"{pair[0][1] / pair[1][1]:>11.2f}" if len(pair) == 2 else ""
        _, f, args, _ = built["fungrad"][i]
        print(f"  {name:<30}{''.join(cells)}{ratio}   {_fg_facts(fg, f, args)}")
        if show_plan and i == 0:
            text = fg.jit(f).lower(*args).compile().as_text()
            print(text[text.find("# fusion plan") : text.find("# LLVM IR")])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--only", default="cnn,lstm", help="comma-separated subset of cnn, lstm, transformer"
    )
    p.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    p.add_argument("--plan", action="store_true", help="print fungrad's fusion plan of the step")
    args = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import fungrad as fg

    jax = optional("jax")
    frameworks = [("fungrad", fg)] + ([("jax", jax)] if jax is not None else [])
    timing = dict(min_time=0.2, repeats=3) if args.quick else dict(min_time=0.6, repeats=5)
    for key in [k for k in args.only.split(",") if k]:
        if key not in PARTS:
            p.error(f"--only: unknown {key!r}; choose from {', '.join(PARTS)}")
        profile(key, frameworks, timing, args.plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
