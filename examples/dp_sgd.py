"""Per-example gradients and DP-SGD: `vmap(grad)` gives one gradient per example in a single
pass; each is clipped to an L2 norm of at most C, they are summed, Gaussian noise of standard
deviation sigma * C is added and the sum is divided by the batch size (Abadi et al. 2016,
"Deep Learning with Differential Privacy"). Trained on scikit-learn's 8x8 digits with the
64-128-10 MLP of digits_mlp.py, next to the same model trained without privacy.

    python examples/dp_sgd.py                 # full run
    python examples/dp_sgd.py --smoke         # a few steps (CI)

Shows: `fg.vmap(fg.grad(loss), in_axes=(None, 0, 0))` over a Module (the per-example gradient
is a Module whose leaves have a leading batch axis), checked against a Python loop of `grad`;
per-example gradient norms (how many get clipped); the noise drawn with explicit keys inside
the jitted step. The privacy budget (epsilon) depends on an accountant that is not part of
this example: it reports the noise multiplier and the clipping norm it used.
"""

from __future__ import annotations

import _gallery
import numpy as np
from digits_mlp import MLP, accuracy, batches, load_digits

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import random, tree_util


def example_loss(model, x, y):
    """Cross-entropy of one example (x: (64,), y: a scalar label)."""
    return -fg.nn.log_softmax(model(x))[y]


per_example_grads = fg.vmap(fg.grad(example_loss), in_axes=(None, 0, 0))


def per_example_norms(grads):
    """The L2 norm of each example's whole gradient (all leaves together): shape (batch,)."""
    leaves = tree_util.tree_leaves(grads)
    return fnp.sqrt(sum(fnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves))


def privatize(grads, key, clip_norm: float, noise_multiplier: float):
    """Clip each example's gradient to norm <= clip_norm, sum, add N(0, (sigma C)^2) noise to
    every coordinate, divide by the batch size."""
    norms = per_example_norms(grads)
    batch = norms.shape[0]
    factors = fnp.minimum(1.0, clip_norm / fnp.maximum(norms, 1e-12))
    leaves, treedef = tree_util.tree_flatten(grads)
    keys = random.split(key, len(leaves))
    noisy = []
    for g, k in zip(leaves, keys):
        clipped = fnp.sum(g * factors.reshape((batch,) + (1,) * (g.ndim - 1)), axis=0)
        noise = noise_multiplier * clip_norm * random.normal(k, clipped.shape, clipped.dtype)
        noisy.append((clipped + noise) / batch)
    return tree_util.tree_unflatten(treedef, noisy), norms


def make_steps(opt, clip_norm: float, noise_multiplier: float):
    @fg.jit
    def dp_step(model, opt_state, x, y, key):
        grads = per_example_grads(model, x, y)
        grad, norms = privatize(grads, key, clip_norm, noise_multiplier)
        updates, opt_state = opt.update(grad, opt_state, model)
        loss = fnp.mean(fg.vmap(example_loss, in_axes=(None, 0, 0))(model, x, y))
        return optim.apply_updates(model, updates), opt_state, loss, norms

    @fg.jit
    def plain_step(model, opt_state, x, y):
        loss, grad = fg.value_and_grad(
            lambda m: fnp.mean(fg.vmap(example_loss, in_axes=(None, 0, 0))(m, x, y))
        )(model)
        updates, opt_state = opt.update(grad, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return dp_step, plain_step


def check_against_loop(model, x, y):
    """vmap(grad) equals one grad call per example; returns the largest difference."""
    batched = per_example_grads(model, x, y)
    worst = 0.0
    for i in range(x.shape[0]):
        single = fg.grad(example_loss)(model, x[i], y[i])
        for a, b in zip(tree_util.tree_leaves(batched), tree_util.tree_leaves(single)):
            worst = max(worst, float(np.max(np.abs(np.asarray(a[i]) - np.asarray(b)))))
    return worst


def describe(norms) -> str:
    q = np.percentile(np.asarray(norms), [0, 50, 90, 100])
    return f"min {q[0]:.3f} / median {q[1]:.3f} / p90 {q[2]:.3f} / max {q[3]:.3f}"


def main(argv=None):
    p = _gallery.parser(__doc__.splitlines()[0], steps=1000, batch_size=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip-norm", type=float, default=1.0, help="C: per-example L2 bound")
    p.add_argument("--noise-multiplier", type=float, default=1.0, help="sigma (noise sd / C)")
    args = p.parse_args(argv)
    steps = 4 if args.smoke else args.steps
    out = _gallery.output_dir(args.out)
    C, sigma = args.clip_norm, args.noise_multiplier

    x_train, x_test, y_train, y_test = load_digits(args.seed)
    print(f"digits: {len(x_train)} train / {len(x_test)} test; batch {args.batch_size}")
    key, init_key = random.split(random.key(args.seed))
    model0 = MLP(key=init_key)

    worst = check_against_loop(model0, x_train[:8], y_train[:8])
    print(f"vmap(grad) vs a Python loop of grad over 8 examples: max |difference| {worst:.2e}")
    assert worst < 1e-5, worst

    opt = optim.adam(args.lr)
    dp_step, plain_step = make_steps(opt, C, sigma)
    dp_model, dp_state = model0, opt.init(model0)
    plain_model, plain_state = model0, opt.init(model0)
    rng = np.random.default_rng(args.seed)
    it = batches(len(x_train), args.batch_size, rng)
    dp_losses, plain_losses, clipped = [], [], []
    first_norms = last_norms = None
    with _gallery.Timer() as timer:
        bar = _gallery.progress(steps, "DP-SGD")
        for i in bar:
            idx = next(it)
            key, sub = random.split(key)
            dp_model, dp_state, loss, norms = dp_step(
                dp_model, dp_state, x_train[idx], y_train[idx], sub
            )
            plain_model, plain_state, plain_loss = plain_step(
                plain_model, plain_state, x_train[idx], y_train[idx]
            )
            dp_losses.append(float(loss))
            plain_losses.append(float(plain_loss))
            norms = np.asarray(norms)
            clipped.append(float(np.mean(norms > C)))
            first_norms = norms if first_norms is None else first_norms
            last_norms = norms
            if i % 20 == 0:
                bar.set_postfix(dp_loss=f"{np.mean(dp_losses[-20:]):.4f}")
    dp_acc = float(accuracy(dp_model, x_test, y_test))
    plain_acc = float(accuracy(plain_model, x_test, y_test))
    print(f"trained {steps} steps of each in {timer.seconds:.1f} s, compile included")
    print(f"per-example gradient norms, first batch: {describe(first_norms)}")
    print(f"per-example gradient norms, last batch:  {describe(last_norms)}")
    print(
        f"clipped to C={C}: {clipped[0] * 100:.0f}% of the first batch, "
        f"{clipped[-1] * 100:.0f}% of the last"
    )
    print(f"noise multiplier sigma={sigma}: noise sd {sigma * C:.2f} per coordinate of the sum")
    print(f"test accuracy: DP-SGD {dp_acc * 100:.2f}%, non-private {plain_acc * 100:.2f}%")
    png = _gallery.save_curves(
        out / "dp_sgd_loss.png",
        {f"DP-SGD (C={C}, sigma={sigma})": dp_losses, "non-private": plain_losses},
        title="digits MLP: DP-SGD vs non-private Adam",
        logy=True,
    )
    print(f"loss curves saved to {png}")
    return dp_acc, plain_acc


if __name__ == "__main__":
    main()
