"""CNN on the digits: two conv blocks (conv 3x3 -> batch norm -> relu -> 2x2 max pool) and a
linear classifier, on scikit-learn's bundled 8x8 digits as 8x8x1 images (channels last).

    python examples/digits_cnn.py              # full run: prints test accuracy, saves a PNG
    python examples/digits_cnn.py --smoke      # a few steps (CI)

Shows: `fungrad.nn.Conv2d`, `BatchNorm` with its running statistics as explicit state
threaded through the jitted step, `MaxPool2d`, `Dropout` with keys, `Sequential`, and
evaluation with `inference=True` (running statistics, no dropout).
"""

from __future__ import annotations

import _gallery
import numpy as np
from digits_mlp import batches, load_digits

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import nn


def make_cnn(key):
    k1, k2, k3 = fg.random.split(key, 3)
    return nn.Sequential(
        [
            nn.Conv2d(1, 16, 3, padding="SAME", key=k1),  # 8x8x16
            nn.BatchNorm(16, momentum=0.9),
            fg.nn.relu,
            nn.MaxPool2d(2),  # 4x4x16
            nn.Conv2d(16, 32, 3, padding="SAME", key=k2),  # 4x4x32
            nn.BatchNorm(32, momentum=0.9),
            fg.nn.relu,
            nn.MaxPool2d(2),  # 2x2x32
            lambda x: x.reshape(x.shape[:-3] + (-1,)),  # 128 features
            nn.Dropout(0.1),
            nn.Linear(128, 10, key=k3),
        ]
    )


def cross_entropy(model, state, x, y, key):
    logits, state = model(x, state, key=key)
    logp = fg.nn.log_softmax(logits)
    return -fnp.mean(fnp.take_along_axis(logp, y[:, None], axis=1)), state


def make_step(opt):
    @fg.jit
    def step(model, state, opt_state, x, y, key):
        (loss, state), grads = fg.value_and_grad(cross_entropy, has_aux=True)(
            model, state, x, y, key
        )
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), state, opt_state, loss

    return step


@fg.jit
def accuracy(model, state, x, y):
    logits, _ = model(x, state, inference=True)
    return fnp.mean(fnp.argmax(logits, axis=-1) == y)


def main(argv=None):
    p = _gallery.parser(__doc__.splitlines()[0], steps=300, batch_size=128)
    p.add_argument("--lr", type=float, default=3e-3)
    args = p.parse_args(argv)
    steps = 5 if args.smoke else args.steps
    out = _gallery.output_dir(args.out)

    x_train, x_test, y_train, y_test = load_digits(args.seed)
    x_train, x_test = x_train.reshape(-1, 8, 8, 1), x_test.reshape(-1, 8, 8, 1)
    print(f"digits: {len(x_train)} train / {len(x_test)} test images of 8x8x1, 10 classes")
    key, init_key = fg.random.split(fg.random.key(args.seed))
    model = make_cnn(init_key)
    state = model.init_state()
    n_params = sum(int(np.size(p)) for p in fg.tree_util.tree_leaves(model))
    print(f"CNN with {n_params} parameters")
    opt = optim.adam(args.lr)
    opt_state = opt.init(model)
    step = make_step(opt)
    rng = np.random.default_rng(args.seed)

    losses = []
    with _gallery.Timer() as timer:
        it = batches(len(x_train), args.batch_size, rng)
        bar = _gallery.progress(steps, "digits CNN")
        for i in bar:
            idx = next(it)
            key, sub = fg.random.split(key)
            model, state, opt_state, loss = step(
                model, state, opt_state, x_train[idx], y_train[idx], sub
            )
            losses.append(float(loss))
            if i % 20 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
        acc = float(accuracy(model, state, x_test, y_test))
    print(
        f"trained {steps} steps (batch {args.batch_size}, adam lr {args.lr}) in "
        f"{timer.seconds:.1f} s on {_gallery.threads_note()}, compile included"
    )
    print(f"final train loss {np.mean(losses[-20:]):.4f}")
    print(f"test accuracy {acc * 100:.2f}%")
    png = _gallery.save_curves(
        out / "digits_cnn_loss.png",
        {"train loss": losses},
        title="digits CNN (conv-BN-relu-pool x2), Adam",
        logy=True,
    )
    print(f"loss curve saved to {png}")
    return acc


if __name__ == "__main__":
    main()
