"""Second-order optimisation: Newton's method (the full Hessian from `fg.hessian`) and
Newton-CG (Hessian-vector products as `jvp` of `grad`, never forming the Hessian) against
gradient descent, on an L2-regularised logistic regression of scikit-learn's bundled breast
cancer data (569 patients, 30 features), in float64.

    python examples/second_order.py           # full run
    python examples/second_order.py --smoke   # fewer iterations (CI)

Shows: forward-over-reverse `fg.jvp(fg.grad(f), (w,), (v,))` for H @ v (checked against the
dense Hessian), conjugate gradient in `lax.fori_loop` inside a jitted step,
`fnp.linalg.solve`, `fg.enable_x64`; the optimum is checked against scikit-learn's
LogisticRegression, which minimises the same objective.
"""

from __future__ import annotations

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax


def load_data():
    """Standardised features with a column of ones (the bias) and 0/1 labels, float64."""
    datasets = _gallery.require("sklearn.datasets")
    x, y = datasets.load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    return np.hstack([x, np.ones((len(x), 1))]), y.astype(np.float64)


def make_objective(x, y, lam):
    """Mean logistic loss + lam/2 * |w|^2 (the bias, the last weight, is not penalised)."""
    x, y = fnp.asarray(x), fnp.asarray(y)

    def f(w):
        z = x @ w
        # log(1 + exp(z)) - y z, written stably
        data = fnp.mean(fnp.logaddexp(0.0, z) - y * z)
        return data + 0.5 * lam * fnp.sum(w[:-1] ** 2)

    return f


def hvp(f, w, v):
    """H(w) @ v by forward-over-reverse: the directional derivative of grad f along v."""
    return fg.jvp(fg.grad(f), (w,), (v,))[1]


def make_steps(f, lr, cg_iters):
    grad = fg.grad(f)

    @fg.jit
    def gd_step(w):
        return w - lr * grad(w)

    @fg.jit
    def newton_step(w):
        return w - fnp.linalg.solve(fg.hessian(f)(w), grad(w))

    @fg.jit
    def newton_cg_step(w):
        """Solve H d = -g by cg_iters steps of conjugate gradient, using only H @ v."""
        g = grad(w)

        def body(_, carry):
            d, r, p, rr = carry
            hp = hvp(f, w, p)
            alpha = rr / fnp.maximum(p @ hp, 1e-300)
            d, r = d + alpha * p, r - alpha * hp
            rr_new = r @ r
            return d, r, r + (rr_new / fnp.maximum(rr, 1e-300)) * p, rr_new

        r0 = -g
        d, *_ = lax.fori_loop(0, cg_iters, body, (fnp.zeros_like(w), r0, r0, r0 @ r0))
        return w + d

    return gd_step, newton_step, newton_cg_step


def run(step, w0, iters, f, grad):
    w, values, gnorms = w0, [], []
    for _ in range(iters + 1):
        values.append(float(f(w)))
        gnorms.append(float(fnp.linalg.norm(grad(w))))
        w = step(w)
    return values, gnorms


def first_below(gnorms, tol):
    return next((i for i, g in enumerate(gnorms) if g < tol), None)


def main(argv=None):
    p = _gallery.parser(__doc__.splitlines()[0], steps=300)
    p.add_argument("--lam", type=float, default=1e-2, help="L2 regularisation strength")
    p.add_argument("--lr", type=float, default=1.0, help="gradient descent step size")
    p.add_argument("--cg-iters", type=int, default=10)
    args = p.parse_args(argv)
    gd_iters = 20 if args.smoke else args.steps
    newton_iters = 10
    out = _gallery.output_dir(args.out)
    tol = 1e-8

    with fg.enable_x64(True):
        x, y = load_data()
        n, d = x.shape
        print(f"breast cancer: {n} examples, {d - 1} features + bias, lam={args.lam}")
        f = make_objective(x, y, args.lam)
        grad = fg.grad(f)
        w0 = fnp.zeros(d, dtype=fnp.float64)

        rng = np.random.default_rng(args.seed)
        w_probe, v = fnp.asarray(rng.standard_normal(d)), fnp.asarray(rng.standard_normal(d))
        dense = np.asarray(fg.hessian(f)(w_probe)) @ np.asarray(v)
        err = np.max(np.abs(np.asarray(hvp(f, w_probe, v)) - dense)) / np.max(np.abs(dense))
        print(f"Hessian-vector product (jvp of grad) vs the dense Hessian: rel. error {err:.1e}")
        assert err < 1e-10, err

        gd_step, newton_step, newton_cg_step = make_steps(f, args.lr, args.cg_iters)
        runs = {
            f"gradient descent (lr {args.lr})": run(gd_step, w0, gd_iters, f, grad),
            "Newton (dense Hessian)": run(newton_step, w0, newton_iters, f, grad),
            f"Newton-CG ({args.cg_iters} HVPs/step)": run(
                newton_cg_step, w0, newton_iters, f, grad
            ),
        }
        best = min(min(values) for values, _ in runs.values())
        print(f"{'method':<32} {'final loss':>20} {'|grad|':>10}  iters to |grad| < {tol:g}")
        for name, (values, gnorms) in runs.items():
            hit = first_below(gnorms, tol)
            hit = "not reached" if hit is None else str(hit)
            print(f"{name:<32} {values[-1]:>20.15f} {gnorms[-1]:>10.1e}  {hit}")

        newton_g = runs["Newton (dense Hessian)"][1]
        print(
            "Newton's |grad| per iteration (quadratic convergence): "
            + " ".join(f"{g:.0e}" for g in newton_g[:8])
        )

        # scikit-learn minimises C * sum(logloss) + |w|^2 / 2, i.e. our f scaled by C n, with
        # C = 1 / (lam n) (the intercept is not penalised in either).
        lm = _gallery.require("sklearn.linear_model")
        ref = lm.LogisticRegression(C=1.0 / (args.lam * n), tol=1e-12, max_iter=10_000)
        ref.fit(x[:, :-1], y)
        w_ref = np.concatenate([ref.coef_[0], ref.intercept_])
        f_ref = float(f(fnp.asarray(w_ref)))
        print(
            f"scikit-learn's LogisticRegression (lbfgs) reaches loss {f_ref:.15f}; "
            f"Newton's loss - that = {runs['Newton (dense Hessian)'][0][-1] - f_ref:.1e}"
        )

    curves = {name: [max(v - best, 1e-16) for v in values] for name, (values, _) in runs.items()}
    png = _gallery.save_curves(
        out / "second_order.png",
        curves,
        title="logistic regression: f(w_k) - f*",
        xlabel="iteration",
        ylabel="f - f*",
        logy=True,
    )
    print(f"convergence plot saved to {png}")


if __name__ == "__main__":
    main()
