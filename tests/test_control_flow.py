"""lax.cond / switch / while_loop / fori_loop / scan / map: eager values against Python loops,
jaxprs, and their derivatives and batching (finite differences, loops of per-example calls)."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.testing import check_grads


def test_cond_and_switch_values():
    assert float(lax.cond(True, lambda x: x + 1, lambda x: x - 1, 1.0)) == 2.0
    assert float(lax.cond(0, lambda x: x + 1, lambda x: x - 1, 1.0)) == 0.0
    branches = [lambda x: x * 0, lambda x: x * 1, lambda x: x * 2]
    assert [float(lax.switch(i, branches, 3.0)) for i in (-5, 0, 1, 2, 7)] == [0, 0, 3, 6, 6]
    out = lax.cond(True, lambda d: {"a": d["a"] * 2}, lambda d: {"a": d["a"]}, {"a": 2.0})
    assert float(out["a"]) == 4.0


def test_cond_jaxpr_and_closure():
    w = fnp.arange(3.0)

    def f(p, x):
        return lax.cond(p, lambda x: x * w, lambda x: x + w, x)

    jaxpr = fg.make_jaxpr(f)(True, np.ones(3, np.float32))
    assert "cond[" in str(jaxpr) and "branches=(" in str(jaxpr)
    (out,) = jaxpr(True, np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2])


def test_loops_match_python():
    assert int(lax.fori_loop(0, 10, lambda i, s: s + i, 0)) == 45
    assert int(lax.while_loop(lambda c: c < 100, lambda c: c * 2, 1)) == 128
    xs = np.arange(5, dtype=np.float32)
    carry, ys = lax.scan(lambda c, x: (c + x, c * x), 0.0, xs)
    c, expected = 0.0, []
    for x in xs:
        expected.append(c * x)
        c += x
    assert float(carry) == c
    np.testing.assert_array_equal(np.asarray(ys), expected)
    carry_r, ys_r = lax.scan(lambda c, x: (c + x, c), 0.0, xs, reverse=True)
    np.testing.assert_array_equal(np.asarray(ys_r), [10, 9, 7, 4, 0])
    np.testing.assert_array_equal(np.asarray(lax.map(lambda x: x**2, xs)), xs**2)
    # traced bounds: a while_loop
    jaxpr = fg.make_jaxpr(lambda n: lax.fori_loop(0, n, lambda i, s: s + 1.0, 0.0))(3)
    assert "while[" in str(jaxpr)


def test_grad_through_cond(x64):
    def f(x):
        return lax.cond(x[0] > 0, lambda x: fnp.sum(fnp.sin(x) * x), lambda x: fnp.sum(x**3), x)

    for x in (np.array([0.5, 1.2, -0.3]), np.array([-0.5, 1.2, -0.3])):
        check_grads(f, (x,), order=2)


def test_grad_through_scan_and_fori(x64):
    w = np.array([[0.5, -0.2], [0.1, 0.3]])

    def rnn(h0, xs):
        def step(h, x):
            h = fnp.tanh(w @ h + x)
            return h, fnp.sum(h)

        h, ys = lax.scan(step, h0, xs)
        return fnp.sum(h) + fnp.sum(ys**2)

    rng = np.random.default_rng(0)
    check_grads(rnn, (rng.standard_normal(2), rng.standard_normal((4, 2))), order=2)

    def power(x):
        return lax.fori_loop(0, 4, lambda i, v: v * x + i, 1.0)

    check_grads(power, (0.7,), order=2)
    np.testing.assert_allclose(
        float(fg.grad(power)(0.7)), 4 * 0.7**3 + 3 * 0.7**2 * 0 + 2 * 0.7 * 1 + 2, rtol=1e-6
    )


def test_while_loop_forward_mode_and_reverse_error():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * x), (0, 1.0))[1]

    y, t = fg.jvp(f, (1.1,), (1.0,))
    np.testing.assert_allclose(float(t), 5 * 1.1**4, rtol=1e-5)
    with pytest.raises(
        TypeError, match="Reverse-mode differentiation does not work for lax.while_loop.*fori_loop"
    ):
        fg.grad(f)(1.1)


def test_vmap_of_control_flow_matches_loop():
    xs = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)

    def f(x):
        return lax.cond(x > 0, lambda x: x * 10, lambda x: -x, x)

    np.testing.assert_array_equal(np.asarray(fg.vmap(f)(xs)), [float(f(x)) for x in xs])
    assert "select_n" in str(fg.make_jaxpr(fg.vmap(f))(xs))  # batched predicate -> select

    def g(n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))[1]

    ns = np.array([0, 3, 1, 5], np.int32)
    np.testing.assert_array_equal(np.asarray(fg.vmap(g)(ns)), [float(g(n)) for n in ns])

    def h(x):
        return lax.scan(lambda c, _: (c * x, c), 1.0, None, length=3)

    carry, ys = fg.vmap(h)(xs)
    np.testing.assert_allclose(np.asarray(carry), xs**3)
    np.testing.assert_allclose(np.asarray(ys), np.stack([np.ones(4), xs, xs**2], axis=1))


def test_per_example_grad_through_scan():
    xs = np.linspace(0.1, 1.0, 4).astype(np.float32)

    def f(x):
        return lax.scan(lambda c, _: (fnp.sin(c) * x, None), x, None, length=3)[0]

    got = fg.vmap(fg.grad(f))(xs)
    expected = [float(fg.grad(f)(x)) for x in xs]
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5)


def test_errors():
    with pytest.raises(TypeError, match="true_fun returns f32.. but false_fun returns i32"):
        lax.cond(True, lambda x: x, lambda x: x.astype(np.int32), 1.0)
    with pytest.raises(TypeError, match="init_val holds f32.. but body_fun returns f32.2."):
        lax.while_loop(lambda c: c < 3, lambda c: np.ones(2, np.float32) * c, 0.0)
    with pytest.raises(TypeError, match="must return a boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c + 1, 0.0)
    with pytest.raises(ValueError, match="inconsistent lengths"):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))
    with pytest.raises(fg.ConcretizationTypeError):
        lax.cond(True, lambda x: x if x > 0 else -x, lambda x: x, 1.0)


def test_while_loop_max_steps_is_reverse_differentiable(x64):
    def f(x):
        # Newton iterations for sqrt(2) scaled by x, stopping when converged
        def body(c):
            y, i = c
            return 0.5 * (y + 2.0 / y) * x, i + 1

        return lax.while_loop(lambda c: c[1] < 4, body, (1.0, 0), max_steps=10)[0]

    def ref(x):
        y = 1.0
        for _ in range(4):
            y = 0.5 * (y + 2.0 / y) * x
        return y

    np.testing.assert_allclose(float(f(1.1)), ref(1.1), rtol=1e-12)
    check_grads(f, (1.1,), order=2)
    # more iterations than max_steps: stops after max_steps
    out = lax.while_loop(lambda c: c < 100, lambda c: c + 1, 0, max_steps=7)
    assert int(out) == 7


# -- issue 15 item 18: branch mismatches name true_fun/false_fun (or the switch index) and paths --


def _true_branch(x):
    return {"p": x, "q": (x, x * 2)}


def _false_branch(x):
    return {"p": x[:2], "q": (x, (x * 2).astype(np.int32))}


def test_issue15_cond_mismatch_names_true_and_false_fun_and_leaf_paths():
    """cond's branches are [false_fun, true_fun]; the old message said "branch 1" for the true
    branch. Now every differing leaf is listed by path, compared against true_fun (as JAX),
    with where each function is defined and the fix."""
    with pytest.raises(TypeError) as e:
        lax.cond(True, _true_branch, _false_branch, fnp.ones(3))
    msg = str(e.value)
    assert msg.startswith("cond: true_fun and false_fun must return equal output types")
    assert (
        "* output['p']: true_fun returns f32[3] but false_fun returns f32[2] (the shapes "
        "differ)" in msg
    )
    assert (
        "* output['q'][1]: true_fun returns f32[3] but false_fun returns i32[3] (the dtypes "
        "differ)" in msg
    )
    assert "output['q'][0]" not in msg  # equal leaves are not listed
    assert f"true_fun is _true_branch at {__file__}:" in msg
    assert f"false_fun is _false_branch at {__file__}:" in msg
    assert "Revise true_fun and/or false_fun" in msg
    assert "branch 1" not in msg


def test_issue15_cond_structure_mismatch_names_the_path():
    with pytest.raises(
        TypeError,
        match=r"cond: true_fun and false_fun must return the same "
        r"pytree structure, but at output\['q'\] true_fun "
        r"returns a tuple of length 2 and false_fun returns a "
        r"leaf \(an array\)",
    ):
        lax.cond(False, lambda x: {"p": x, "q": (x, x)}, lambda x: {"p": x, "q": x}, 1.0)
    with pytest.raises(
        TypeError,
        match=r"at output true_fun returns a leaf \(an array\) and "
        r"false_fun returns a tuple of length 2",
    ):
        lax.cond(True, lambda x: x, lambda x: (x, x), 1.0)


def test_issue15_switch_mismatch_names_the_branch_index():
    with pytest.raises(TypeError) as e:
        lax.switch(0, [lambda x: x, lambda x: x, lambda x: x[:2]], fnp.ones(3))
    msg = str(e.value)
    assert "switch: branch 0 and branch 2 must return equal output types" in msg
    assert "* output: branch 0 returns f32[3] but branch 2 returns f32[2]" in msg


def test_issue15_cond_weak_types_may_differ_and_values_stay_right():
    # a weakly typed Python scalar in one branch and a float32 array in the other agree
    for pred, expected in [(True, 1.0), (False, 3.0)]:
        out = lax.cond(pred, lambda x: 1.0, lambda x: x[0], fnp.full(3, 3.0))
        assert float(out) == expected


def test_issue15_control_flow_misuse_gives_clear_errors():
    x = fnp.ones(3)
    with pytest.raises(TypeError, match="cond: true_fun must be callable"):
        lax.cond(True, x, lambda a: a, x)
    with pytest.raises(TypeError, match="cond: false_fun must be callable"):
        lax.cond(True, lambda a: a, None, x)
    with pytest.raises(ValueError, match="switch: branches must be a non-empty sequence"):
        lax.switch(0, "ab", x)
    with pytest.raises(TypeError, match="switch: branches must be callable, but branch 1 is"):
        lax.switch(0, [lambda a: a, 3], x)
    with pytest.raises(
        TypeError, match="cond true_fun output: expected an array, got a value of type str"
    ):
        lax.cond(True, lambda a: "s", lambda a: a, x)


def test_issue15_operand_keyword_as_jax():
    x = fnp.arange(3.0)
    np.testing.assert_array_equal(
        np.asarray(lax.cond(False, lambda a: a, lambda a: a * 2, operand=x)), np.arange(3.0) * 2
    )
    np.testing.assert_array_equal(
        np.asarray(lax.switch(1, [lambda a: a, lambda a: a + 1], operand=x)), np.arange(3.0) + 1
    )
    with pytest.raises(
        TypeError,
        match="cond: pass the operands either positionally or as "
        "the one keyword 'operand', not both",
    ):
        lax.cond(True, lambda a, b: a, lambda a, b: b, x, operand=x)


# -- issue 15 follow-ups: loop misuse names the argument, carries are checked by leaf path ---


def test_issue15_loops_say_which_argument_must_be_callable():
    x = fnp.ones(3)
    with pytest.raises(TypeError, match=r"scan: f must be callable, got 3 \(of type int\)"):
        lax.scan(3, 0.0, x)
    with pytest.raises(TypeError, match="while_loop: body_fun must be callable, got 3"):
        lax.while_loop(lambda c: c < 3, 3, 0)
    with pytest.raises(TypeError, match="while_loop: cond_fun must be callable, got None"):
        lax.while_loop(None, lambda c: c + 1, 0)
    with pytest.raises(TypeError, match="fori_loop: body_fun must be callable, got 'f'"):
        lax.fori_loop(0, 3, "f", 0)
    with pytest.raises(TypeError, match="map: f must be callable, got 3"):
        lax.map(3, x)


def test_issue15_scan_body_must_return_a_pair():
    x = fnp.ones(3)
    with pytest.raises(
        TypeError,
        match=r"scan: f must return a pair \(carry, y\), got f32\[\]; "
        r"return \(new_carry, y\)",
    ):
        lax.scan(lambda c, a: c + a, 0.0, x)
    with pytest.raises(TypeError, match="got a tuple of length 3"):
        lax.scan(lambda c, a: (c, a, a), 0.0, x)
    # a list of two is a pair too (JAX)
    carry, ys = lax.scan(lambda c, a: [c + a, c], 0.0, x)
    assert float(carry) == 3.0
    np.testing.assert_array_equal(np.asarray(ys), [0.0, 1.0, 2.0])


def _scan_body_changing_b(c, a):
    return {"w": c["w"] + a, "b": (c["b"][0], c["b"][1].astype(np.int32))}, None


def test_issue15_loop_carry_mismatches_name_the_leaf_path_and_both_types():
    init = {"w": fnp.zeros(()), "b": (fnp.zeros(2), fnp.zeros(()))}
    with pytest.raises(TypeError) as e:
        lax.scan(_scan_body_changing_b, init, fnp.ones(3))
    msg = str(e.value)
    assert msg.startswith("scan: init and the carry f returns must have equal types")
    assert "* c['b'][1]: init holds f32[] but f returns i32[] (the dtypes differ)" in msg
    assert "c['w']" not in msg and "c['b'][0]" not in msg  # equal leaves are not listed
    assert f"f is _scan_body_changing_b at {__file__}:" in msg
    with pytest.raises(
        TypeError,
        match=r"while_loop: init_val and the carry body_fun returns "
        r"must have the same pytree structure, but at val "
        r"init_val holds a tuple of length 2 and body_fun "
        r"returns a list of length 2",
    ):
        lax.while_loop(lambda val: val[0] < 3, lambda val: [val[0] + 1, val[1]], (0, 0.0))
    with pytest.raises(
        TypeError,
        match=r"\* val\[1\]: init_val holds f32\[\] but body_fun "
        r"returns f32\[2\] \(the shapes differ\)",
    ):
        lax.while_loop(lambda val: val[0] < 3, lambda val: (val[0] + 1, fnp.ones(2)), (0, 0.0))
    # fori_loop names body_fun's carry (not the loop's internal (i, val) pair), on both paths
    for hi in (3, fnp.int32(3)):
        with pytest.raises(
            TypeError,
            match=r"fori_loop: init_val and the carry body_fun "
            r"returns must have equal types.*\n  \* acc: "
            r"init_val holds i32\[\] but body_fun returns "
            r"f32\[\] \(the dtypes differ\)",
        ):
            fg.jit(lambda n: lax.fori_loop(0, n, lambda i, acc: acc + 1.5, fnp.int32(0)))(hi)
    with pytest.raises(
        TypeError,
        match=r"while_loop: init_val and the carry body_fun returns "
        r"must have equal types",
    ):
        lax.while_loop(lambda c: c < 3, lambda c: fnp.ones(2) + c, 0.0, max_steps=4)


def test_issue15_weakly_typed_carries_take_the_body_dtype_as_in_jax():
    """A Python scalar in init is weakly typed: JAX promotes it to the type the body returns
    (a strong dtype) instead of refusing the loop."""
    xs = np.array([0.25, 0.5, 1.75], np.float32)
    carry, _ = lax.scan(lambda c, a: (c + a * 1.5, None), 0, xs)
    assert carry.dtype == np.float32 and not carry.aval.weak_type
    assert float(carry) == float(np.sum(xs * np.float32(1.5)))
    out = lax.while_loop(lambda c: c < 3, lambda c: c + 1.5, 0)
    assert out.dtype == np.float32 and float(out) == 3.0
    out = lax.fori_loop(0, 3, lambda i, c: c + 1.5, 0)
    assert out.dtype == np.float32 and float(out) == 4.5
    out = fg.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + 1.5, 0))(3)
    assert out.dtype == np.float32 and float(out) == 4.5
    # a strong int carry stays an error (JAX: the dtypes differ)
    with pytest.raises(TypeError, match="the dtypes differ"):
        lax.fori_loop(0, 3, lambda i, c: c + 1.5, fnp.int32(0))


def test_issue15_fori_loop_bounds_follow_jax():
    """Bounds must have equal dtypes (a Python int adapts to a signed int bound); concrete
    bounds run int(upper) - int(lower) steps with a weakly typed int index, traced ones a while
    loop in the bounds' dtype."""

    def body(i, c):
        return c + i

    with pytest.raises(
        TypeError, match="fori_loop: lower and upper must have equal types, got float32 and int32"
    ):
        lax.fori_loop(0.5, 3, body, 0.0)
    with pytest.raises(TypeError, match="got uint32 and int32"):
        lax.fori_loop(np.uint32(0), 3, body, 0.0)
    # equal float bounds are accepted; concrete ones are truncated (JAX: int(lower), int(upper))
    assert float(lax.fori_loop(0.5, 3.5, body, 0.0)) == 0 + 1 + 2
    assert float(fg.jit(lambda a, b: lax.fori_loop(a, b, body, 0.0))(0.5, 3.5)) == 0.5 + 1.5 + 2.5
    seen = []

    def record(i, c):
        seen.append(core_aval(i))
        return c

    lax.fori_loop(np.int8(1), 3, record, 0.0)
    fg.jit(lambda a: lax.fori_loop(a, 3, record, 0.0))(np.int8(1))
    assert seen == [("int32", True), ("int8", False)]
    assert float(lax.fori_loop(np.int8(1), 4, body, 0.0)) == 1 + 2 + 3


def core_aval(x):
    a = fg.core.get_aval(x)
    return a.dtype.name, a.weak_type
