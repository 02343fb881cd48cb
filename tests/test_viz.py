"""fg.viz: the graph model matches the jaxpr, the fusion overlay covers the plan, backward
equations link to their forward line, the page is self-contained, the CLI works."""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.shape_dtype_struct import ShapeDtypeStruct
from fungrad.viz import viz
from fungrad.viz.cli import parse_spec
from fungrad.viz.graph import build_graph, sub_jaxprs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mlp_loss(w1, w2, x):
    h = fnp.tanh(x @ w1)
    return fnp.sum((h @ w2) ** 2)


def control(x):
    y = fg.lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: fnp.sin(x), x)
    c, _ = fg.lax.scan(lambda c, x: (c + x, c * x), 0.0, y)
    return c


MLP_ARGS = (np.ones((16, 8), np.float32), np.ones((8, 4), np.float32), np.ones((2, 16), np.float32))


# large enough that the CPU plan runs the products as matrix-product (gemm) steps
GEMM_ARGS = (
    np.ones((784, 32), np.float32),
    np.ones((32, 10), np.float32),
    np.ones((8, 784), np.float32),
)


def count_eqns(jaxpr):
    """Equations of ``jaxpr``, nested jaxprs' included (independent of the viewer's walk)."""
    return sum(1 + sum(count_eqns(j) for _, j, _ in sub_jaxprs(e)) for e in jaxpr.eqns)


def test_graph_matches_jaxpr_with_nested_groups():
    closed = fg.make_jaxpr(control)(np.ones(3, np.float32))
    g = build_graph(closed)
    assert len(g.eqn_nodes()) == count_eqns(closed.jaxpr)
    prims = sorted(n.eqn.primitive.name for n in g.eqn_nodes())
    assert "cond" in prims and "scan" in prims and "sin" in prims
    # one group per branch and one for the scan body, owned by their equations' nodes
    owners = sorted(g.nodes[grp.owner].eqn.primitive.name for grp in g.groups.values())
    assert owners == ["cond", "cond", "scan"]
    kinds = [g.nodes[n].kind for n in g.top]
    assert kinds.count("input") == 1 and kinds.count("output") == 1
    # every edge carries the type of the value it stands for
    for e in g.edges:
        assert re.fullmatch(r"(f|i|u|c)\d+\[[0-9,]*\]|bool\[[0-9,]*\]", e.label), e.label
    assert any(e.label == "f32[3]" for e in g.edges)


def test_edges_follow_dataflow_and_sources_name_user_lines():
    closed = fg.make_jaxpr(mlp_loss)(*MLP_ARGS)
    g = build_graph(closed)
    eqns = closed.jaxpr.eqns
    nodes = g.eqn_nodes()
    assert [n.eqn for n in nodes] == eqns
    by_eqn = {id(n.eqn): n.id for n in nodes}
    expected = sum(1 for e in eqns for v in e.invars if not isinstance(v, fg.core.Literal)) + len(
        closed.jaxpr.outvars
    )
    assert len(g.edges) == expected
    dot = next(e for e in eqns if e.primitive.name == "dot_general")
    assert any(e.dst == by_eqn[id(dot)] and e.label == "f32[2,16]" for e in g.edges)
    for n in nodes:
        assert n.source.startswith(__file__) and "mlp_loss" in n.source


def test_page_is_self_contained_and_has_nodes_groups():
    v = viz(control, np.ones(3, np.float32))
    html = v.html
    assert not re.search(r"https?://", html)
    assert "<script src" not in html and "<link" not in html
    assert html.count('class="group') == 2 and 'data-kind="eqn"' in html
    assert "test_viz.py:" in html  # source lines in the tooltips


def test_fusion_kernels_cover_every_equation():
    v = viz(fg.jit(fg.grad(mlp_loss, argnums=(0, 1))), *GEMM_ARGS)
    plan = v.plan
    assert plan is not None
    names = {s["name"] for s in plan.summaries}
    assert len(plan.steps) == len(plan.jaxpr.jaxpr.eqns)
    for eqn, steps in zip(plan.jaxpr.jaxpr.eqns, plan.steps):
        assert steps, f"{eqn.primitive.name} is in no step"
        assert set(steps) <= names
    prog = plan.program
    assert f"{len(prog.temps)} temporaries sharing {prog.scratch_bytes} bytes" in v.html
    temp = next(b for b in prog.temps)
    assert f"{temp.name} (temp) {temp.dtype.name}{list(temp.shape)}" in v.html
    kinds = {s["kind"] for s in plan.summaries}
    assert "kernel" in kinds and "gemm" in kinds
    for name in names:
        assert f'data-kernel="{name}"' in v.html
    # every equation node of the planned program carries its kernels
    g = v.graphs["backward"]
    assert all(f'id="p1-{n.id}"' in v.html for n in g.eqn_nodes())
    assert v.html.count("data-kernels=") >= len(plan.jaxpr.jaxpr.eqns)


def test_profile_badges_and_fusion_flag():
    first = viz(mlp_loss, *MLP_ARGS, fusion=True)
    key = first.plan.summaries[0]["name"]
    v = viz(mlp_loss, *MLP_ARGS, profile={key: 2.5e-5})
    assert 'class="badge">25 µs' in v.html


def test_profile_times_key_the_plan_steps():
    """The step names a real fungrad.profile() reports are the viewer's: every timed step of
    the jitted gradient gets its badge."""
    from fungrad.profiler import profile

    step = fg.jit(fg.grad(mlp_loss, argnums=(0, 1)))
    with profile() as prof:
        step(*GEMM_ARGS)
    times = prof.times()
    v = viz(step, *GEMM_ARGS, profile=prof)
    names = {s["name"] for s in v.plan.summaries}
    assert set(times) == names
    assert v.html.count('class="badge"') == len(times)


def test_backward_links_forward_lines():
    v = viz(fg.grad(mlp_loss), *MLP_ARGS)
    assert set(v.graphs) == {"forward", "backward"}
    fwd, bwd = v.graphs["forward"], v.graphs["backward"]
    assert v.links
    linked_fwd = {f for f, _ in v.links}
    # the tanh's derivative (1 - tanh^2) in the backward pass points at the forward tanh
    tanh = next(n for n in fwd.eqn_nodes() if n.eqn.primitive.name == "tanh")
    assert tanh.id in linked_fwd
    for f, b in v.links:
        assert fwd.nodes[f].source_key == bwd.nodes[b].source_key
        assert fwd.nodes[f].source == bwd.nodes[b].source
    same = viz(mlp_loss, *MLP_ARGS, backward=True)
    assert len(same.links) == len(v.links)


def test_save_and_path(tmp_path):
    out = tmp_path / "g.html"
    v = viz(control, np.ones(3, np.float32), path=out)
    assert out.read_text(encoding="utf-8") == v.html
    other = tmp_path / "h.html"
    assert v.save(other) == str(other) and other.read_text(encoding="utf-8") == v.html


def test_large_graph_is_fast_and_collapses_groups():
    def big(x):
        for i in range(1000):
            x = fnp.sin(x) if i % 2 else x * 1.5
        return fg.lax.fori_loop(0, 3, lambda i, c: c + fnp.cos(c), x)

    closed = fg.make_jaxpr(big)(np.ones(4, np.float32))
    t0 = time.perf_counter()
    v = viz(big, np.ones(4, np.float32))
    elapsed = time.perf_counter() - t0
    assert len(v.graphs["forward"].eqn_nodes()) == count_eqns(closed.jaxpr)
    assert elapsed < 20  # generous: the page takes well under 2 s on an idle core
    assert 'class="group collapsed node"' in v.html


def test_shape_dtype_struct_arguments():
    v = viz(mlp_loss, *(ShapeDtypeStruct(a.shape, a.dtype) for a in MLP_ARGS))
    assert len(v.graphs["forward"].eqn_nodes()) == 5


@pytest.mark.parametrize(
    "spec,shape,dtype",
    [("f32[8,784]", (8, 784), np.float32), ("i32[]", (), np.int32), ("bool[ 3 ]", (3,), np.bool_)],
)
def test_parse_spec(spec, shape, dtype):
    s = parse_spec(spec)
    assert s.shape == shape and s.dtype == np.dtype(dtype)


@pytest.mark.parametrize("bad", ["f32", "float[3]", "f32[3,x]", "q8[2]", ""])
def test_parse_spec_rejects(bad):
    with pytest.raises(ValueError, match="bad argument spec"):
        parse_spec(bad)


def test_bad_input():
    with pytest.raises(TypeError, match="viz: expected a function"):
        viz(3, np.ones(2))
    with pytest.raises(TypeError, match="profile must map"):
        viz(control, np.ones(3, np.float32), profile=[1.0])


def test_cli(tmp_path):
    mod = tmp_path / "model.py"
    mod.write_text(
        "import fungrad.numpy as fnp\n\ndef loss(w, x):\n    return fnp.sum(fnp.tanh(x @ w))\n"
    )
    out = tmp_path / "out.html"
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "fungrad", "viz", "model:loss", "--args", "f32[4,3]", "f32[2,4]"]
    r = subprocess.run(
        [*cmd, "-o", str(out), "--fusion"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    html = out.read_text(encoding="utf-8")
    assert "model.py:4 (loss)" in html and "Fusion plan" in html and "f32[2,4]" in html


def test_cli_bad_input(tmp_path, capsys, monkeypatch):
    from fungrad.viz import cli

    (tmp_path / "model2.py").write_text("def loss(x):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["model2.py:loss", "--args", "f32[4,x]"]) == 2
    assert "bad argument spec 'f32[4,x]'" in capsys.readouterr().err
    assert cli.main(["model2.py:nope", "--args", "f32[4]"]) == 2
    assert "has no attribute 'nope'" in capsys.readouterr().err
    assert cli.main(["model2.py"]) == 2
    assert "expected module:function" in capsys.readouterr().err
    assert cli.main(["model2.py:loss", "--args", "f32[4]", "-o", "o.html"]) == 0
    assert (tmp_path / "o.html").exists()


def test_page_script_parses(tmp_path):
    """The page's script is valid JavaScript (checked by node when it is installed; the
    browser test runs it)."""
    import shutil

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no node on PATH to check the script's syntax")
    html = viz(control, np.ones(3, np.float32), fusion=True).html
    start = html.rindex("<script>") + len("<script>")
    script = tmp_path / "page.js"
    script.write_text(html[start : html.index("</script>", start)], encoding="utf-8")
    r = subprocess.run([node, "--check", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
