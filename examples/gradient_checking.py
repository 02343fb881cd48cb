"""Property-based gradient checking: a custom op with a hand-written VJP rule, tested with
hypothesis strategies from ``fungrad.testing.strategies`` and ``fungrad.testing.check_grads``,
and a deliberately wrong rule being caught.

The op is softplus, ``log(1 + e^x)``, computed stably and given a ``fungrad.custom_vjp``
whose backward rule is ``g * sigmoid(x)``. The wrong rule, ``sigmoid(x)``, forgets the
incoming cotangent ``g``, the commonest custom-rule slip: a hand-written test of
``grad(lambda x: sum(softplus(x)))`` passes (``sum`` sends ``g = 1``), while the
property, which pulls random cotangents back through the rule, fails on the first array
hypothesis draws and shrinks the failure to the smallest input that shows it.

    python examples/gradient_checking.py           # the right rule passes, the wrong one is
                                                   # caught (its failure printed); exits 0
    python examples/gradient_checking.py --wrong   # ship the wrong rule: the check fails,
                                                   # exit status 1
    python examples/gradient_checking.py --smoke   # 10 examples per property (CI)

``--steps N`` sets the hypothesis examples per property (default 40) and ``--seed`` the
examples drawn; the example saves no plots.

Each property checks, on arrays drawn by hypothesis: first and second derivatives (reverse
mode) against central finite differences in float64 (``check_grads(..., order=2,
modes=("rev",))`` under ``fg.enable_x64``), and the jitted gradient against the eager one.
Needs hypothesis (the ``test`` and ``dev`` extras).
"""

from __future__ import annotations

import sys

import _gallery
import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.testing import check_grads

try:
    import hypothesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import HypothesisException

    from fungrad.testing import strategies as fst
except ImportError:  # hypothesis is the test extra's; say so rather than fail obscurely
    sys.exit("gradient_checking.py needs hypothesis: pip install -e '.[test]' (or '.[dev]')")


def right_rule(x, g):
    """d softplus / dx = sigmoid(x)."""
    return (g * fg.nn.sigmoid(x),)


def wrong_rule(x, g):
    """The cotangent g forgotten: right only when g is all ones."""
    del g
    return (fg.nn.sigmoid(x),)


def make_softplus(bwd_rule):
    """Softplus as a ``custom_vjp`` op whose backward pass is ``bwd_rule(x, g)``."""

    @fg.custom_vjp
    def softplus(x):
        # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|
        return fnp.maximum(x, 0.0) + fnp.log1p(fnp.exp(-fnp.abs(x)))

    def fwd(x):
        return softplus(x), x  # the residual is the input

    softplus.defvjp(fwd, bwd_rule)
    return softplus


def gradient_property(op, max_examples: int, seed: int):
    """The property, as a hypothesis test of ``op`` (call it to run it). ``seed`` fixes the
    examples hypothesis draws, so a run is reproducible."""

    @hypothesis.seed(seed)
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,  # keep the example free of a .hypothesis/ directory
        suppress_health_check=[HealthCheck.too_slow],
        print_blob=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),  # no "explain" phase
    )
    @given(fst.arrays(np.float32, fst.shapes(max_dims=2, max_side=5), min_value=-30, max_value=30))
    def test_softplus_gradients(x):
        with fg.enable_x64(True):  # float64 finite differences: tight tolerances
            check_grads(op, (x,), order=2, modes=("rev",))
        # Compiled and eager gradients agree too.
        g = fg.grad(lambda v: fnp.sum(op(v)))
        np.testing.assert_allclose(np.asarray(fg.jit(g)(x)), np.asarray(g(x)), rtol=1e-5, atol=1e-6)

    return test_softplus_gradients


def hand_written_test(op) -> None:
    """The kind of test one writes by hand: the gradient of a sum at a few points."""
    x = np.array([0.5, 1.0, 2.0], np.float32)
    got = np.asarray(fg.grad(lambda v: fnp.sum(op(v)))(x))
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-x)), rtol=1e-6)


def run_property(name: str, op, max_examples: int, seed: int):
    """Run the property on ``op``; return None when it holds, else the failure's text."""
    try:
        gradient_property(op, max_examples, seed)()
    except (AssertionError, HypothesisException) as e:
        notes = "\n".join(getattr(e, "__notes__", []))
        return f"{type(e).__name__}: {e}\n{notes}".strip()
    print(
        f"[pass] {name}: first and second derivatives on {max_examples} hypothesis-drawn "
        f"arrays (0-d, size-0, up to 5x5, values in [-30, 30])"
    )
    return None


def main(argv=None) -> int:
    # The gallery's command line; here --steps counts hypothesis examples, --out is unused.
    p = _gallery.parser("Property-based gradient checking of a custom_vjp rule.", steps=40)
    p.add_argument(
        "--wrong", action="store_true", help="test the wrong rule alone: it fails, exit status 1"
    )
    args = p.parse_args(argv)
    n = 10 if args.smoke else args.steps
    if n < 1:
        p.error("--steps (hypothesis examples per property) must be >= 1")

    if args.wrong:
        failure = run_property("softplus, wrong rule", make_softplus(wrong_rule), n, args.seed)
        if failure is None:
            print("the wrong rule was NOT caught")
            return 1
        print("[FAIL] softplus's VJP rule is wrong:\n" + failure)
        return 1

    ok = run_property("softplus, right rule", make_softplus(right_rule), n, args.seed)
    if ok is not None:
        print("[FAIL] the right rule failed:\n" + ok)
        return 1

    wrong = make_softplus(wrong_rule)
    hand_written_test(wrong)
    print("[pass] a hand-written test of grad(sum(softplus(x))) at x = [0.5, 1, 2] passes")
    print("       with the WRONG rule too: sum() sends a cotangent of ones")
    failure = run_property("softplus, wrong rule", wrong, n, args.seed)
    if failure is None:
        print("[FAIL] the wrong rule was not caught")
        return 1
    print("[caught] the property-based check rejects the wrong rule; hypothesis reports:")
    print("    " + failure.replace("\n", "\n    "))
    print("(run with --wrong to see the check fail with exit status 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
