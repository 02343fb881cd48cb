"""Digits classifier: an MLP (64-128-10) on scikit-learn's bundled 8x8 digits (1,797 images,
no download), trained with one jitted step (forward, backward and Adam in one native
function).

    python examples/digits_mlp.py              # full run: prints test accuracy, saves a PNG
    python examples/digits_mlp.py --smoke      # a few steps (CI)

Shows: `fungrad.nn.Linear` layers in a `Module`, `fungrad.optim.adam` with a
`cosine_decay_schedule`, `fg.jit` over a model and an optimizer state (both pytrees), a tqdm
bar with the running loss, and a loss curve saved with matplotlib.
"""

from __future__ import annotations

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import nn


class MLP(nn.Module):
    """Linear -> relu -> Linear, on flattened 8x8 images."""

    hidden: nn.Linear
    out: nn.Linear

    def __init__(self, sizes=(64, 128, 10), *, key):
        k1, k2 = fg.random.split(key)
        self.hidden = nn.Linear(sizes[0], sizes[1], key=k1)
        self.out = nn.Linear(sizes[1], sizes[2], key=k2)

    def __call__(self, x):
        return self.out(fg.nn.relu(self.hidden(x)))


def load_digits(seed: int):
    """The digits as float32 in [0, 1], split 80/20 (stratified) into train and test."""
    datasets = _gallery.require("sklearn.datasets")
    model_selection = _gallery.require("sklearn.model_selection")
    x, y = datasets.load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    y = y.astype(np.int32)
    return model_selection.train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def cross_entropy(model, x, y):
    logp = fg.nn.log_softmax(model(x))
    return -fnp.mean(fnp.take_along_axis(logp, y[:, None], axis=1))


def make_step(opt):
    @fg.jit
    def step(model, opt_state, x, y):
        loss, grads = fg.value_and_grad(cross_entropy)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return step


@fg.jit
def accuracy(model, x, y):
    return fnp.mean(fnp.argmax(model(x), axis=-1) == y)


def batches(n: int, batch_size: int, rng: np.random.Generator):
    """Index batches of a fixed size forever (a fresh permutation per epoch; the remainder of
    each epoch is dropped so the jitted step sees one shape)."""
    while True:
        perm = rng.permutation(n)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i : i + batch_size]


def main(argv=None):
    p = _gallery.parser(__doc__.splitlines()[0], steps=1500, batch_size=128)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    args = p.parse_args(argv)
    steps = 5 if args.smoke else args.steps
    out = _gallery.output_dir(args.out)

    x_train, x_test, y_train, y_test = load_digits(args.seed)
    print(f"digits: {len(x_train)} train / {len(x_test)} test images of 8x8, 10 classes")
    model = MLP(key=fg.random.key(args.seed))
    # Adam with the learning rate decayed to 0 along a cosine over the run
    opt = optim.adam(optim.cosine_decay_schedule(args.lr, steps))
    opt_state = opt.init(model)
    step = make_step(opt)
    rng = np.random.default_rng(args.seed)

    losses = []
    with _gallery.Timer() as timer:
        it = batches(len(x_train), args.batch_size, rng)
        bar = _gallery.progress(steps, "digits MLP")
        for i in bar:
            idx = next(it)
            model, opt_state, loss = step(model, opt_state, x_train[idx], y_train[idx])
            losses.append(float(loss))
            if i % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
        acc = float(accuracy(model, x_test, y_test))
    print(
        f"trained {steps} steps (batch {args.batch_size}, adam, lr {args.lr} cosine-decayed) in "
        f"{timer.seconds:.1f} s on {_gallery.threads_note()}, compile included"
    )
    print(f"final train loss {np.mean(losses[-20:]):.4f}")
    print(f"test accuracy {acc * 100:.2f}%")
    png = _gallery.save_curves(
        out / "digits_mlp_loss.png",
        {"train loss": losses},
        title="digits MLP 64-128-10, Adam",
        logy=True,
    )
    print(f"loss curve saved to {png}")
    return acc


if __name__ == "__main__":
    main()
