"""The same training step on the CPU and on the GPU: one Python function, compiled by
``fg.jit`` to native CPU code (LLVM) and, with ``backend="gpu"``, to WGSL compute shaders
run through WebGPU (Vulkan, Metal or DirectX 12).

An MLP classifies points of three interleaved spirals, trained with ``fungrad.optim.adam``.
Both copies start from the same parameters and see the same batches, so their losses and
final parameters agree to float32 rounding; the example prints both, the largest parameter
difference and each backend's time per step. The GPU copy keeps its parameters and
optimizer state on the device between steps (``fg.GpuArray``): only the batch goes up and the
loss comes down.

    python examples/gpu_training.py                # 300 steps on each backend
    python examples/gpu_training.py --smoke        # a few steps, to check it runs

Writes ``gpu_training_loss.png`` (both backends' loss curves) to ``--out`` (default
``examples/out/``).

Where no WebGPU adapter exists it says so, with how to get one, and trains on the CPU only
(exit status 0). A software adapter (Mesa's lavapipe/llvmpipe, Windows' WARP) counts as an
adapter: it runs the shaders on CPU threads, so the example reports it as such and its times
say nothing about a real GPU. ``FUNGRAD_GPU_ADAPTER=<text>`` picks another adapter
(``fg.devices("gpu")`` lists them).
"""

from __future__ import annotations

import os
import sys
import time

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import nn, random


def spirals(rng: np.random.Generator, n: int, classes: int = 3, noise: float = 0.15):
    """``n`` points ``(n, 2)`` on ``classes`` interleaved spiral arms, and their labels."""
    y = rng.integers(0, classes, size=n)
    r = rng.uniform(0.1, 1.0, size=n)
    theta = 2 * np.pi * y / classes + 3.0 * r + noise * rng.standard_normal(n)
    x = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)
    return x.astype(np.float32), y.astype(np.int32)


class MLP(nn.Module):
    layers: list

    def __init__(self, sizes, *, key):
        keys = random.split(key, len(sizes) - 1)
        self.layers = [nn.Linear(a, b, key=k) for a, b, k in zip(sizes, sizes[1:], keys)]

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = fg.nn.relu(layer(x))
        return self.layers[-1](x)


def loss_fn(model, x, y):
    logp = fg.nn.log_softmax(model(x))
    return -fnp.mean(fnp.take_along_axis(logp, y[:, None], axis=1))


def train_step(opt):
    """The training step, a plain function: ``jit`` decides where it runs."""

    def step(model, opt_state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return step


def find_gpu():
    """``(device, note)``: the WebGPU adapter ``backend="gpu"`` uses and a line about it, or
    ``(None, why)`` where there is none."""
    try:
        found = fg.devices("gpu")
    except Exception as e:  # wgpu missing or a broken driver stack
        return None, f"the GPU runtime is unavailable ({type(e).__name__}: {e})"
    active = [d for d in found if d.active]
    if not active and found:  # adapters exist, but FUNGRAD_GPU_ADAPTER names none of them
        names = "; ".join(d.device_kind for d in found)
        wanted = os.environ.get("FUNGRAD_GPU_ADAPTER", "")
        return None, f"FUNGRAD_GPU_ADAPTER={wanted!r} matches no adapter (found: {names})"
    if not active:
        return None, (
            "no WebGPU adapter was found. Install a Vulkan driver (Linux: the vendor's, or "
            "Mesa's `apt install mesa-vulkan-drivers`, which includes the software "
            "adapter lavapipe), Metal (macOS) or DirectX 12 (Windows)"
        )
    gpu = active[0]
    # device_kind is "<name> (<API>, <adapter type>)"; type CPU means a software rasteriser
    if gpu.device_kind.rstrip(")").rsplit(", ", 1)[-1] == "CPU":
        note = (
            "a SOFTWARE adapter: it runs the WGSL shaders on CPU threads, so this checks "
            "the GPU code path, and its times say nothing about a real GPU"
        )
    else:
        note = "a hardware adapter"
    return gpu, note


def train(step, model, opt_state, batches, label: str):
    """Run ``step`` over ``batches``; return the final model, the losses, the time of the
    first call (tracing and compiling) and the mean time of the others."""
    losses = []
    t0 = time.perf_counter()
    t_first = 0.0
    for i, (x, y) in enumerate(batches):
        model, opt_state, loss = step(model, opt_state, x, y)
        losses.append(float(loss))  # downloads one scalar
        if i == 0:
            t_first = time.perf_counter() - t0
    rest = (time.perf_counter() - t0 - t_first) / max(1, len(batches) - 1)
    print(
        f"{label}: loss {losses[0]:.4f} -> {losses[-1]:.4f}; first step (compile) "
        f"{t_first:.2f} s, then {1e3 * rest:.2f} ms/step"
    )
    return model, losses


def accuracy(model, x, y) -> float:
    return float(np.mean(np.argmax(np.asarray(model(x)), axis=1) == y))


def main(argv=None) -> int:
    p = _gallery.parser(
        "The same jitted training step on the CPU and on the GPU.", steps=300, batch_size=256
    )
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps = 3
    if args.steps < 1:
        p.error("--steps must be >= 1")

    rng = np.random.default_rng(args.seed)
    batches = [spirals(rng, args.batch_size) for _ in range(args.steps)]
    x_test, y_test = spirals(rng, 2000)
    model = MLP([2, args.hidden, args.hidden, 3], key=random.key(args.seed))
    opt = optim.adam(args.lr)
    step = train_step(opt)
    print(
        f"MLP 2-{args.hidden}-{args.hidden}-3 on three spirals, Adam, batch "
        f"{args.batch_size}, {args.steps} steps per backend"
    )

    cpu_model, cpu_losses = train(fg.jit(step), model, opt.init(model), batches, "cpu")
    print(f"cpu: test accuracy {accuracy(cpu_model, x_test, y_test):.3f}")

    gpu, note = find_gpu()
    out = _gallery.output_dir(args.out)
    if gpu is None:
        print(f"gpu: skipped: {note}. Trained on the CPU only.")
        png = _gallery.save_curves(
            out / "gpu_training_loss.png", {"cpu": cpu_losses}, title="three spirals, Adam"
        )
        print(f"loss curve saved to {png}")
        return 0
    print(f"gpu: {gpu.device_kind}: {note}")
    gpu_step = fg.jit(step, backend="gpu")
    gpu_model, gpu_losses = train(gpu_step, model, opt.init(model), batches, "gpu")
    print(
        f"gpu: test accuracy {accuracy(gpu_model, x_test, y_test):.3f} "
        f"(parameters are {type(fg.tree_util.tree_leaves(gpu_model)[0]).__name__}s, "
        f"resident on the device)"
    )

    diff = max(
        float(np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0))
        for a, b in zip(fg.tree_util.tree_leaves(cpu_model), fg.tree_util.tree_leaves(gpu_model))
    )
    loss_diff = float(np.max(np.abs(np.array(cpu_losses) - np.array(gpu_losses))))
    print(
        f"cpu vs gpu: largest parameter difference {diff:.2e}, largest loss difference "
        f"{loss_diff:.2e} (float32 rounding in another summation order, compounded over "
        f"{args.steps} Adam steps)"
    )
    png = _gallery.save_curves(
        out / "gpu_training_loss.png", {"cpu": cpu_losses, "gpu": gpu_losses},
        title="three spirals, Adam: CPU and GPU (the curves coincide)",
    )  # fmt: skip
    print(f"loss curves saved to {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
