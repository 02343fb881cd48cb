"""An LSTM (or GRU) that learns noisy sine waves: trained to predict the next sample, then
run closed-loop (its own predictions fed back in) to forecast the rest of the wave.

Shows: ``fungrad.nn.LSTMCell`` / ``GRUCell`` run over time by ``fungrad.nn.rnn`` (one
``lax.scan``, differentiated and compiled with the rest of the step); a jitted training step
with ``fungrad.optim.adam``; and a hand-written ``lax.scan`` whose carry is the cell state
plus the last prediction, for the closed-loop forecast.

    python examples/sequence_rnn.py                    # LSTM, 400 steps
    python examples/sequence_rnn.py --cell gru
    python examples/sequence_rnn.py --smoke            # a few steps, to check it runs

Each sequence is ``sin(w t + phase) + noise`` with its own frequency ``w`` and phase, so the
model must infer them from the samples it has seen. Writes ``sequence_rnn_loss.png`` and
``sequence_rnn_forecast.png`` (one forecast) to ``--out`` (default ``examples/out/``).
"""

from __future__ import annotations

import sys

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import lax, nn, random


def make_waves(rng: np.random.Generator, n: int, length: int, noise: float):
    """``n`` noisy sine waves ``(n, length, 1)`` (the noise-free ones too, for plotting)."""
    t = np.arange(length, dtype=np.float32)
    w = rng.uniform(0.15, 0.45, size=(n, 1)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1)).astype(np.float32)
    clean = np.sin(w * t + phase).astype(np.float32)
    noisy = clean + noise * rng.standard_normal(clean.shape).astype(np.float32)
    return noisy[..., None], clean[..., None]


class Forecaster(nn.Module):
    """A recurrent cell followed by a linear read-out of each hidden state."""

    cell: nn.Module
    head: nn.Linear

    def __init__(self, cell_type: str, hidden: int, *, key):
        k1, k2 = random.split(key)
        cell_cls = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}[cell_type]
        self.cell = cell_cls(1, hidden, key=k1)
        self.head = nn.Linear(hidden, 1, key=k2)

    def __call__(self, xs):
        """One-step-ahead predictions for every position of ``xs`` ``(B, T, 1)``, and the
        final carry (to continue from)."""
        hs, carry = nn.rnn(self.cell, xs, time_axis=1)
        return self.head(hs), carry

    def forecast(self, xs, horizon: int):
        """Read ``xs`` ``(B, T, 1)``, then predict ``horizon`` more samples, each fed back
        in as the next input: ``(B, horizon, 1)``."""
        preds, carry = self(xs)

        def step(state, _):
            carry, x = state
            carry = self.cell(x, carry)
            y = self.head(carry[0] if isinstance(carry, tuple) else carry)
            return (carry, y), y

        _, ys = lax.scan(step, (carry, preds[:, -1]), None, length=horizon)
        return fnp.concatenate([preds[:, -1:], fnp.moveaxis(ys, 0, 1)[:, :-1]], axis=1)


def loss_fn(model, xs):
    """Mean squared error of the next-sample predictions."""
    preds, _ = model(xs[:, :-1])
    return fnp.mean((preds - xs[:, 1:]) ** 2)


def main(argv=None) -> int:
    p = _gallery.parser("An LSTM/GRU forecasting noisy sine waves.", steps=400, batch_size=32)
    p.add_argument("--cell", choices=("lstm", "gru"), default="lstm")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--length", type=int, default=60, help="training sequence length")
    p.add_argument("--noise", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps = 3
    if args.steps < 1 or args.length < 3:
        p.error("--steps must be >= 1 and --length >= 3")

    rng = np.random.default_rng(args.seed)
    model = Forecaster(args.cell, args.hidden, key=random.key(args.seed))
    opt = optim.adam(optim.cosine_decay_schedule(args.lr, args.steps, alpha=0.05))
    opt_state = opt.init(model)
    print(
        f"model: {args.cell.upper()} with {args.hidden} hidden units and a linear read-out, "
        f"trained on noisy sine waves (noise sd {args.noise}) of {args.length} samples"
    )

    @fg.jit
    def step(model, opt_state, xs):
        loss, grads = fg.value_and_grad(loss_fn)(model, xs)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    losses = []
    with _gallery.Timer() as timer:
        bar = _gallery.progress(args.steps, f"{args.cell} sine")
        for i in bar:
            xs, _ = make_waves(rng, args.batch_size, args.length, args.noise)
            model, opt_state, loss = step(model, opt_state, xs)
            losses.append(float(loss))
            if i % 10 == 0:
                bar.set_postfix(mse=f"{np.mean(losses[-10:]):.4f}")
    print(
        f"trained {args.steps} steps in {timer.seconds:.1f} s on {_gallery.threads_note()}, "
        f"compile included; train MSE {losses[0]:.4f} -> {losses[-1]:.4f}"
    )

    # One-step-ahead error on fresh waves, against the clean signal; the noise variance
    # is the floor a perfect model reaches on the noisy targets.
    test_noisy, test_clean = make_waves(rng, 256, args.length, args.noise)
    preds, _ = fg.jit(lambda m, x: m(x))(model, test_noisy[:, :-1])
    mse = float(np.mean((np.asarray(preds) - test_clean[:, 1:]) ** 2))
    persist = float(np.mean((test_noisy[:, :-1] - test_clean[:, 1:]) ** 2))
    print(
        f"test one-step MSE vs the clean wave: {mse:.4f} "
        f"(repeat-the-last-sample baseline: {persist:.4f})"
    )

    # Closed loop: read 40 samples, then predict 40 from the model's own outputs.
    context, horizon = 40, 40
    noisy, clean = make_waves(rng, 64, context + horizon, args.noise)
    forecast = np.asarray(fg.jit(lambda m, x: m.forecast(x, horizon))(model, noisy[:, :context]))
    f_mse = float(np.mean((forecast - clean[:, context:]) ** 2))
    print(
        f"closed-loop forecast of {horizon} samples: MSE {f_mse:.4f} vs the clean wave "
        f"(a zero forecast: {float(np.mean(clean[:, context:] ** 2)):.4f})"
    )

    out = _gallery.output_dir(args.out)
    png = _gallery.save_curves(
        out / "sequence_rnn_loss.png", {"train MSE": losses},
        title=f"{args.cell.upper()} on noisy sine waves", ylabel="MSE", logy=True,
    )  # fmt: skip
    print(f"loss curve saved to {png}")
    t_ctx, t_fc = np.arange(context), np.arange(context, context + horizon)
    png = _gallery.save_curves(
        out / "sequence_rnn_forecast.png",
        {
            "observed (noisy)": (t_ctx, noisy[0, :, 0][:context]),
            "true wave": (t_fc, clean[0, context:, 0]),
            "closed-loop forecast": (t_fc, forecast[0, :, 0]),
        },
        title=f"reading {context} samples, then forecasting {horizon}",
        xlabel="t", ylabel="value",
    )  # fmt: skip
    print(f"forecast plot saved to {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
