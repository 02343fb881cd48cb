"""A character-level decoder-only transformer (GPT-style) language model, trained on the Zen
of Python (the text that ships in the standard library's ``this`` module), then sampled.

Shows: ``fungrad.nn`` modules (``Embedding``, ``TransformerDecoderBlock``, ``LayerNorm``,
``Linear``) as one pytree; a jitted training step with ``fungrad.optim`` (AdamW after
global-norm clipping, a warm-up + cosine learning-rate schedule); and sampling compiled as
one native function: a ``lax.fori_loop`` that slides a window over the generated text and
draws each character with ``fungrad.random.categorical``.

    python examples/char_transformer.py                # 400 steps, then 300 sampled chars
    python examples/char_transformer.py --smoke        # a few steps, to check it runs

Writes the loss curve to ``--out`` (default ``examples/out/``) as ``char_transformer_loss.png``.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import math
import sys
import time

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
import fungrad.optim as optim
from fungrad import lax, nn, random


def zen_of_python() -> str:
    """The Zen of Python, decoded from ``this.s`` (rot13) without printing it: importing
    ``this`` prints the text once, so stdout is silenced for the import."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


class CharTransformer(nn.Module):
    """Token + position embeddings, a stack of causal pre-LN blocks, a final LayerNorm and a
    linear head to the vocabulary: ``model(ids)`` maps ``(*batch, T)`` ints to ``(*batch, T,
    vocab)`` logits, position ``t`` seeing ``ids[..., :t+1]`` only."""

    tok: nn.Embedding
    pos: nn.Embedding
    blocks: list
    norm: nn.LayerNorm
    head: nn.Linear
    block_size: int

    def __init__(
        self, vocab: int, block_size: int, d_model: int, num_heads: int, num_layers: int, *, key
    ):
        keys = random.split(key, num_layers + 3)
        self.tok = nn.Embedding(vocab, d_model, key=keys[0])
        self.pos = nn.Embedding(block_size, d_model, key=keys[1])
        self.blocks = [nn.TransformerDecoderBlock(d_model, num_heads, key=k) for k in keys[3:]]
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, key=keys[2])
        self.block_size = int(block_size)

    def __call__(self, ids):
        T = ids.shape[-1]
        # Embeddings start standard normal (flax's choice); scaled down they train faster.
        h = 0.1 * (self.tok(ids) + self.pos(fnp.arange(T)))
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def loss_fn(model, x, y):
    """Mean cross-entropy of the next character at every position."""
    logp = fg.nn.log_softmax(model(x))
    picked = fnp.take_along_axis(logp, y[..., None], axis=-1)
    return -fnp.mean(picked)


def make_step(opt):
    @fg.jit
    def step(model, opt_state, x, y):
        loss, grads = fg.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    return step


def make_sampler(block_size: int, total: int):
    """A jitted ``sample(model, buf, start, key, temperature) -> buf``: fills ``buf[start:]``
    one character at a time, each drawn from the model's distribution given (at most) the
    ``block_size`` characters before it."""

    @fg.jit
    def sample(model, buf, start, key, temperature):
        def body(t, carry):
            buf, key = carry
            key, sub = random.split(key)
            lo = fnp.maximum(t - block_size, 0)
            window = lax.dynamic_slice(buf, (lo,), (block_size,))
            logits = model(window)  # (block_size, vocab); causal, so later slots do not matter
            last = lax.dynamic_index_in_dim(logits, t - 1 - lo, keepdims=False)
            nxt = random.categorical(sub, last / temperature).astype(buf.dtype)
            return lax.dynamic_update_index_in_dim(buf, nxt, t, 0), key

        buf, _ = lax.fori_loop(start, total, body, (buf, key))
        return buf

    return sample


def batches(data: np.ndarray, block_size: int, batch_size: int, rng: np.random.Generator):
    """Random windows of the text: inputs and the same windows shifted by one."""
    while True:
        starts = rng.integers(0, len(data) - block_size - 1, size=batch_size)
        idx = starts[:, None] + np.arange(block_size)[None, :]
        yield data[idx], data[idx + 1]


def main(argv=None) -> int:
    p = _gallery.parser(
        "A character-level transformer language model on the Zen of Python.",
        steps=400,
        batch_size=16,
    )
    p.add_argument("--block-size", type=int, default=32, help="context length in characters")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--sample-chars", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.8)
    args = p.parse_args(argv)
    if args.smoke:  # a few steps of a one-block model: checks the whole path quickly
        args.steps, args.sample_chars, args.layers = 3, 40, 1
    if args.steps < 1 or args.temperature <= 0:
        p.error("--steps must be >= 1 and --temperature > 0")

    text = zen_of_python()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], np.int32)
    print(f"text: the Zen of Python, {len(text)} characters, vocabulary of {len(chars)}")

    key = random.key(args.seed)
    init_key, sample_key = random.split(key)
    model = CharTransformer(
        len(chars), args.block_size, args.d_model, args.heads, args.layers, key=init_key
    )
    n_params = sum(int(np.prod(leaf.shape)) for leaf in fg.tree_util.tree_leaves(model))
    print(
        f"model: {args.layers} decoder block(s), d_model {args.d_model}, {args.heads} heads, "
        f"context {args.block_size}: {n_params:,} parameters"
    )

    warmup = max(1, min(50, args.steps // 10))
    schedule = optim.warmup_cosine_decay_schedule(
        0.0, args.lr, warmup, max(args.steps, warmup + 1), end_value=args.lr / 10
    )
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(schedule, weight_decay=1e-2))
    opt_state = opt.init(model)
    step = make_step(opt)

    rng = np.random.default_rng(args.seed)
    stream = batches(data, args.block_size, args.batch_size, rng)
    losses = []
    t0 = time.perf_counter()
    with _gallery.Timer() as timer:
        bar = _gallery.progress(args.steps, "char transformer")
        for i in bar:
            x, y = next(stream)
            model, opt_state, loss = step(model, opt_state, x, y)
            losses.append(float(loss))
            if i == 0:
                t_compile = time.perf_counter() - t0
            if i % 10 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-10:]):.3f}")
    per_step = (timer.seconds - t_compile) / max(1, args.steps - 1)
    print(
        f"trained {args.steps} steps in {timer.seconds:.1f} s on {_gallery.threads_note()} "
        f"(first step with compilation {t_compile:.1f} s, then {1e3 * per_step:.0f} ms/step)"
    )
    print(
        f"loss: {losses[0]:.3f} -> {losses[-1]:.3f} nats/char "
        f"(uniform guess: {math.log(len(chars)):.3f})"
    )

    prompt = "Beautiful is"
    total = max(len(prompt) + args.sample_chars, args.block_size)
    buf = np.zeros(total, np.int32)
    buf[: len(prompt)] = [stoi[c] for c in prompt]
    sample = make_sampler(args.block_size, total)
    t0 = time.perf_counter()
    out = np.asarray(sample(model, buf, len(prompt), sample_key, args.temperature))
    generated = "".join(chars[i] for i in out[: len(prompt) + args.sample_chars])
    print(
        f"sample ({args.sample_chars} characters, temperature {args.temperature}, "
        f"{time.perf_counter() - t0:.1f} s):"
    )
    print("-" * 60)
    print(generated)
    print("-" * 60)

    png = _gallery.save_curves(
        _gallery.output_dir(args.out) / "char_transformer_loss.png",
        {"train loss": losses},
        title="character transformer on the Zen of Python",
        ylabel="cross-entropy (nats/char)",
    )
    print(f"loss curve saved to {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
