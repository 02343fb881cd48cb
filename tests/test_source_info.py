"""Source information on traced equations: each equation names the user's line that made it,
transforms (jvp, transpose, vmap, jit, control flow) keep the forward line, and
``pretty_print(source_info=True)`` shows it as a trailing comment."""

import os
import re

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core, source_info

THIS = os.path.basename(__file__)
_SOURCE = open(__file__).read().splitlines()


def line_of(marker: str) -> int:
    """The line number of the one source line ending with ``# <marker>``."""
    (hit,) = [i + 1 for i, s in enumerate(_SOURCE) if s.rstrip().endswith(f"# {marker}")]
    return hit


def all_eqns(jaxpr):
    """Every equation of ``jaxpr`` and of the jaxprs nested in its params."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    for eqn in jaxpr.eqns:
        yield eqn
        for v in eqn.params.values():
            for j in v if isinstance(v, tuple) else (v,):
                if isinstance(j, (core.Jaxpr, core.ClosedJaxpr)):
                    yield from all_eqns(j)


def lines_by_prim(jaxpr):
    out = {}
    for e in all_eqns(jaxpr):
        assert e.source_info is not None, f"no source info on {e}"
        assert e.source_info.file == __file__, e.source_info
        out.setdefault(e.primitive.name, set()).add(e.source_info.line)
    return out


def model(x):
    y = fnp.sin(x)  # SIN
    z = y * 3.0  # MUL
    return fnp.sum(z)  # SUM


def test_line_and_function_of_user_call():
    j = fg.make_jaxpr(model)(np.ones(3, np.float32))
    by = lines_by_prim(j)
    assert by["sin"] == {line_of("SIN")}
    assert by["mul"] == {line_of("MUL")}
    assert by["reduce_sum"] == {line_of("SUM")}
    e = j.eqns[0]
    assert e.source_info.function == "model"
    assert str(e.source_info) == f"{THIS}:{line_of('SIN')} (model)"


def test_grad_jvp_and_transpose_point_at_forward_line():
    # d/dx sum(3 sin x) = 3 cos x: the cos comes from sin's jvp rule, the final mul from the
    # transpose of the forward mul by 3.0 / of sin's tangent mul.
    j = fg.make_jaxpr(fg.grad(model))(np.ones(3, np.float32))
    by = lines_by_prim(j)
    assert by["cos"] == {line_of("SIN")}
    assert by["mul"] <= {line_of("SIN"), line_of("MUL")}
    # the reduce_sum's transpose is a broadcast of the cotangent
    assert by["broadcast_in_dim"] == {line_of("SUM")}


def test_jvp_and_vjp_directly():
    x = np.ones(3, np.float32)
    j = fg.make_jaxpr(lambda x, t: fg.jvp(model, (x,), (t,)))(x, x)
    assert lines_by_prim(j)["cos"] == {line_of("SIN")}
    j = fg.make_jaxpr(lambda x: fg.vjp(model, x)[1](np.float32(1.0)))(x)
    assert lines_by_prim(j)["cos"] == {line_of("SIN")}


def test_inside_jit_vmap_and_their_composition():
    x = np.ones((2, 3), np.float32)
    j = fg.make_jaxpr(fg.vmap(model))(x)
    assert lines_by_prim(j)["sin"] == {line_of("SIN")}
    j = fg.make_jaxpr(fg.jit(model))(x[0])
    by = lines_by_prim(j)
    assert by["sin"] == {line_of("SIN")}
    # vmap of grad of a jitted function: the vmapped jit body is re-staged from the jaxpr
    j = fg.make_jaxpr(fg.vmap(fg.grad(fg.jit(model))))(x)
    by = lines_by_prim(j)
    assert by["cos"] == {line_of("SIN")}
    assert by["sin"] <= {line_of("SIN")}


def _jit_call(x):
    return fg.jit(model)(x)  # JIT


def test_jit_equation_names_the_jit_call():
    j = fg.make_jaxpr(_jit_call)(np.ones(3, np.float32))
    (e,) = j.eqns
    assert e.primitive.name == "jit"
    assert e.source_info.line == line_of("JIT")
    inner = e.params["jaxpr"]
    assert lines_by_prim(inner)["sin"] == {line_of("SIN")}


def scan_loss(c, xs):
    def body(c, x):
        c = c * fnp.cos(x)  # BODY
        return c, c

    return fg.lax.scan(body, c, xs)[0]  # SCAN


def cond_fn(p, x):
    return fg.lax.cond(p, lambda x: fnp.exp(x), lambda x: -x, x)  # COND


def test_nested_scan_and_cond_bodies():
    xs = np.ones(3, np.float32)
    by = lines_by_prim(fg.make_jaxpr(scan_loss)(np.float32(1.0), xs))
    assert by["scan"] == {line_of("SCAN")}
    assert by["cos"] == {line_of("BODY")}
    assert by["mul"] == {line_of("BODY")}
    by = lines_by_prim(fg.make_jaxpr(fg.grad(scan_loss, argnums=1))(np.float32(1.0), xs))
    assert by["sin"] == {line_of("BODY")}  # the jvp of cos, inside the transposed body
    assert by["cos"] == {line_of("BODY")}
    assert set().union(*by.values()) <= {line_of("BODY"), line_of("SCAN")}
    by = lines_by_prim(fg.make_jaxpr(cond_fn)(True, np.float32(2.0)))
    assert by["exp"] == {line_of("COND")} and by["neg"] == {line_of("COND")}
    by = lines_by_prim(fg.make_jaxpr(fg.grad(cond_fn, argnums=1))(True, np.float32(2.0)))
    assert by["exp"] == {line_of("COND")}


@fg.custom_jvp
def softplus(x):
    return fnp.log1p(fnp.exp(x))  # PRIMAL


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + fnp.exp(-x))  # RULE


def test_user_rule_lines_win_inside_custom_jvp():
    j = fg.make_jaxpr(lambda x: fg.jvp(softplus, (x,), (x,)))(np.float32(0.5))
    lines = {e.source_info.line for e in all_eqns(j) if e.source_info.file == __file__}
    assert line_of("RULE") in lines
    assert line_of("PRIMAL") in lines


def test_pretty_print_source_info_format_and_str_unchanged():
    j = fg.make_jaxpr(fg.grad(scan_loss))(np.float32(1.0), np.ones(3, np.float32))
    plain = str(j)
    assert "#" not in plain
    assert j.pretty_print() == plain
    text = j.pretty_print(source_info=True)
    eqn_lines = [s for s in text.splitlines() if " = " in s or s.strip().startswith("scan")]
    assert eqn_lines
    pat = re.compile(r"  # " + re.escape(THIS) + r":\d+ \([\w.<>]+\)$")
    for s in text.splitlines():
        if "# " in s:
            assert pat.search(s), s
    # one comment per equation, at every nesting level
    n_eqns = sum(1 for _ in all_eqns(j))
    assert text.count(f"  # {THIS}:") == n_eqns
    # removing the comments gives back the plain text laid out one equation a line (width 0:
    # no jaxpr is put on one line, as none is with source_info)
    assert re.sub(r"  # [^\n]*", "", text) == j.pretty_print(width=0)
    assert j.jaxpr.pretty_print(source_info=True) == text


def test_no_internal_file_names():
    pkg = os.path.dirname(fg.__file__)
    x = np.ones((2, 3), np.float32)
    for j in (
        fg.make_jaxpr(fg.grad(lambda x: fnp.mean(fnp.tanh(x) ** 2)))(x),
        fg.make_jaxpr(fg.vmap(fg.grad(model)))(x),
        fg.make_jaxpr(fg.jacfwd(model))(x[0]),
    ):
        for e in all_eqns(j):
            assert e.source_info is not None, e
            assert not e.source_info.file.startswith(pkg), e.source_info
            assert e.source_info.file == __file__
    # the IR passes that make_jaxpr runs rebuild equations (CSE renaming, folding, rewrites):
    # they carry the source too
    for e in all_eqns(fg.make_jaxpr(fg.hessian(model))(x[0])):
        assert e.source_info is not None and e.source_info.file == __file__, e


def test_replace_keeps_source_info():
    j = fg.make_jaxpr(model)(np.ones(3, np.float32))
    e = j.eqns[1]
    e2 = e.replace(invars=[e.invars[0], e.invars[0]])
    assert e2.source_info is e.source_info and e2.primitive is e.primitive
    assert e2.invars == [e.invars[0], e.invars[0]] and e2.outvars == e.outvars


def test_source_info_does_not_change_equality_or_values():
    # equal computations from different lines still compare / CSE / evaluate the same
    def f(x):
        a = fnp.sin(x)
        b = fnp.sin(x)
        return a + b

    x = np.linspace(-1, 1, 5).astype(np.float32)
    np.testing.assert_allclose(np.asarray(fg.jit(f)(x)), 2 * np.sin(x), rtol=1e-6)
    j = fg.make_jaxpr(f)(x)
    lines = [e.source_info.line for e in j.eqns if e.primitive.name == "sin"]
    assert len(set(lines)) == len(lines)


def test_source_info_object():
    here = source_info.current(1)  # HERE
    assert here.file == __file__
    assert here.function == "test_source_info_object"
    assert here.line == line_of("HERE")
    assert repr(here).startswith("SourceInfo(") and __file__ in repr(here)
