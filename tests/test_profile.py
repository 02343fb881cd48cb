"""fungrad.profile(): per-step times of profiled builds, and log_compiles on every compile path."""

import logging

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import lax
from fungrad.config import config
from fungrad.lowering import profile as step_profile
from fungrad.profiler import KernelRecord, profile


def _mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = fnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    return -fnp.mean(fg.nn.log_softmax(logits) * y)


@fg.jit
def mlp_step(params, x, y):
    loss, grads = fg.value_and_grad(_mlp_loss)(params, x, y)
    return loss, fg.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def _mlp_args(seed=0):
    rng = np.random.default_rng(seed)
    params = (
        (fnp.asarray(rng.normal(size=(64, 64)).astype(np.float32)), fnp.zeros(64)),
        (fnp.asarray(rng.normal(size=(64, 10)).astype(np.float32)), fnp.zeros(10)),
    )
    x = fnp.asarray(rng.normal(size=(32, 64)).astype(np.float32))
    y = fnp.asarray(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)])
    return params, x, y


def _plan_names(jitted, *args):
    """The step names the profile must report: those of the compiled plan."""
    exe = jitted.lower(*args).compile()._exe
    return {info.name for _, info in step_profile.step_table(exe.program.steps)}


def _leaves(tree):
    return [np.asarray(x) for x in fg.tree_util.tree_leaves(tree)]


def test_every_step_of_an_mlp_step_is_timed_and_counted():
    args = _mlp_args()
    mlp_step(*args)  # compiled outside the profile
    names = _plan_names(mlp_step, *args)
    n = 4
    with profile() as prof:
        for _ in range(n):
            mlp_step(*args)
    records = prof.kernels()
    assert {r.name for r in records} == names
    assert {r.kind for r in records} >= {"kernel", "gemm"}
    assert all(isinstance(r, KernelRecord) and r.program == "mlp_step" for r in records)
    assert all(r.calls == n and r.total_s > 0 and r.parent is None for r in records)
    assert [r.total_s for r in records] == sorted((r.total_s for r in records), reverse=True)
    (program,) = prof.programs()
    assert program.name == "mlp_step" and program.calls == n
    assert sum(r.total_s for r in records) <= program.total_s
    # equations: indices into the program's optimised jaxpr; every product is a gemm's
    n_eqns = len(program.jaxpr.jaxpr.eqns)
    assert all(r.eqns and all(0 <= i < n_eqns for i in r.eqns) for r in records)
    dots = {i for i, e in enumerate(program.jaxpr.jaxpr.eqns) if e.primitive.name == "dot_general"}
    gemm_eqns = {i for r in records if r.kind == "gemm" for i in r.eqns}
    assert dots and dots <= gemm_eqns


def test_results_are_bitwise_identical_with_and_without_profiling():
    args = _mlp_args(1)
    plain = mlp_step(*args)
    with profile():
        profiled = mlp_step(*args)
    again = mlp_step(*args)
    for a, b, c in zip(_leaves(plain), _leaves(profiled), _leaves(again)):
        assert a.tobytes() == b.tobytes() == c.tobytes()


def test_nothing_is_recorded_outside_the_block_and_the_fast_path_comes_back():
    f = fg.jit(lambda x: fnp.sin(x) * 2 + 1)
    x = fnp.ones(64)
    f(x)
    prof = profile()
    f(x)
    assert prof.kernels() == [] and prof.programs() == []
    with prof:
        assert config.jit_general_only
        f(x)
        f(x)
    assert not config.jit_general_only and not step_profile.sinks
    f(x)
    (p,) = prof.programs()
    assert p.calls == 2
    assert all(r.calls == 2 for r in prof.kernels())
    with profile() as empty:
        pass
    assert empty.kernels() == [] and "0 program(s)" in empty.table()


def test_table_lists_each_step_with_its_share():
    args = _mlp_args()
    with profile() as prof:
        mlp_step(*args)
    text = prof.table()
    lines = text.splitlines()
    assert lines[0].split()[:6] == ["program", "kernel", "kind", "calls", "total", "mean"]
    assert "% of program" in lines[0]
    for r in prof.kernels():
        assert any(r.name in line and "mlp_step" in line for line in lines)
    assert lines[-1].startswith("1 program(s), 1 call(s)")
    assert len(prof.table(limit=2).splitlines()) == 2 + 3
    times = prof.times()
    assert times == {r.name: r.total_s for r in prof.kernels()}


def test_programs_of_grad_of_jit_and_nested_profiles():
    f = fg.jit(lambda x: fnp.sum(fnp.tanh(x) ** 2))
    x = fnp.linspace(-1.0, 1.0, 32)
    expected = np.asarray(fg.grad(f)(x))
    with profile() as outer:
        with profile() as inner:
            got = fg.grad(f)(x)
        fg.grad(f)(x)
    np.testing.assert_array_equal(np.asarray(got), expected)
    names = [p.name for p in outer.programs()]
    assert len(names) == 2 and names[0] == "<lambda>" and names[1] == "<lambda>#2"
    assert [p.calls for p in outer.programs()] == [2, 2]
    assert [p.calls for p in inner.programs()] == [1, 1]
    with pytest.raises(ValueError, match="2 programs ran"):
        outer.times()
    assert set(outer.times("<lambda>#2")) == {
        r.name for r in outer.kernels() if r.program == "<lambda>#2"
    }
    with pytest.raises(ValueError, match="no program 'nope'"):
        outer.times("nope")


def test_steps_in_a_scan_body_are_timed_per_iteration():
    def body(c, x):
        c = fnp.tanh(c * 0.5 + x @ fnp.ones((4, 4)))
        return c, fnp.sum(c)

    @fg.jit
    def run(c, xs):
        return lax.scan(body, c, xs)

    c, xs = fnp.ones((3, 4)), fnp.ones((7, 3, 4))
    expected = _leaves(run(c, xs))
    with profile() as prof:
        got = _leaves(run(c, xs))
        run(c, xs)
    for a, b in zip(expected, got):
        assert a.tobytes() == b.tobytes()
    records = prof.kernels()
    (scan,) = [r for r in records if r.kind == "scan"]
    assert scan.calls == 2 and scan.parent is None
    nested = [r for r in records if r.parent == scan.name]
    assert nested and all(r.calls == 2 * 7 for r in nested)
    assert sum(r.total_s for r in nested) <= scan.total_s
    (program,) = prof.programs()
    assert sum(r.total_s for r in records if r.parent is None) <= program.total_s


def test_aot_compiled_and_host_callbacks_are_profiled():
    def f(x):
        y = fg.pure_callback(lambda v: np.asarray(v) * 2, fg.ShapeDtypeStruct((5,), np.float32), x)
        return fnp.cos(y) + 1

    x = fnp.arange(5.0)
    compiled = fg.jit(f).lower(x).compile()
    with profile() as prof:
        out = compiled(x)
    np.testing.assert_allclose(np.asarray(out), np.cos(np.arange(5.0) * 2) + 1, rtol=1e-6)
    kinds = {r.kind for r in prof.kernels()}
    assert "host_callback" in kinds and "kernel" in kinds


def test_profile_errors_are_clear():
    prof = profile()
    with prof:
        with pytest.raises(RuntimeError, match="already open"):
            prof.__enter__()
    with pytest.raises(ValueError, match="0 programs ran"):
        prof.times()


@pytest.fixture
def log_compiles():
    config.update("log_compiles", True)
    try:
        yield
    finally:
        config.update("log_compiles", False)


def _compile_records(caplog):
    return [r for r in caplog.records if r.name == "fungrad.jit" and "Compiling" in r.msg]


PHASES = ("optimize", "plan", "render", "compile")


def test_log_compiles_inside_transforms_aot_and_profiles(caplog, log_compiles):
    f = fg.jit(lambda x: fnp.sum(fnp.sin(x) * x))
    x = fnp.linspace(0.0, 1.0, 16)
    with caplog.at_level(logging.WARNING, logger="fungrad"):
        fg.grad(f)(x)  # the forward and backward parts, compiled inside grad
        inside = _compile_records(caplog)
        assert len(inside) == 2
        for r in inside:
            assert "inside a transform" in r.getMessage()
            assert tuple(r.fungrad_phases) == PHASES and r.fungrad_function == "<lambda>"
        caplog.clear()
        fg.vmap(f)(fnp.ones((3, 16)))
        assert len(_compile_records(caplog)) == 1
        caplog.clear()
        g = fg.jit(lambda x: fnp.cos(x) * 3)
        g.lower(x).compile()  # ahead of time: traced and compiled here
        (aot,) = _compile_records(caplog)
        assert tuple(aot.fungrad_phases) == ("trace", *PHASES) and "x: f32[16]" in aot.getMessage()
        detail = aot.fungrad_compile_detail  # the CPU's compile phase, split
        assert set(detail) == {"llvm_passes", "codegen", "load", "setup", "cache_hit"}
        parts = sum(v for k, v in detail.items() if k != "cache_hit")
        assert parts == pytest.approx(aot.fungrad_phases["compile"], rel=1e-6, abs=1e-9)
        caplog.clear()
        with profile():
            g(x)  # the profiled build is a compile of its own
        (prof,) = _compile_records(caplog)
        assert "(profiled)" in prof.getMessage()
        caplog.clear()
        g(x)
        assert _compile_records(caplog) == []


def _gpu_available():
    try:
        from fungrad.lowering.gpu import runtime

        runtime.select_adapter()
        return True
    except Exception:
        return False


@pytest.mark.skipif(not _gpu_available(), reason="no WebGPU adapter")
def test_gpu_dispatches_are_timed(caplog, log_compiles):
    step = fg.jit(mlp_step.__wrapped__, backend="gpu")
    args = _mlp_args(2)
    with caplog.at_level(logging.WARNING, logger="fungrad"):
        plain = step(*args)
        assert len(_compile_records(caplog)) == 1
    with profile() as prof:
        profiled = step(*args)
        step(*args)
    for a, b in zip(_leaves(plain), _leaves(profiled)):
        assert a.tobytes() == b.tobytes()
    records = prof.kernels()
    assert records and {r.kind for r in records} == {"dispatch"}
    assert all(r.calls >= 2 and r.total_s > 0 for r in records)
    (program,) = prof.programs()
    assert program.calls == 2 and sum(r.total_s for r in records) <= program.total_s
