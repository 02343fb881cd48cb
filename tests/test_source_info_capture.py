"""Source capture beyond staging: the complex split (lowering) keeps the line of each equation
it replaces, and the capture's caches and anchors give the same lines as a plain walk of the
Python stack."""

import numpy as np

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import core
from fungrad.lowering import complex_split

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


@fg.custom_jvp
def cexp(z):
    return fnp.exp(z)  # CEXP


@cexp.defjvp
def _cexp_jvp(primals, tangents):
    return cexp(primals[0]), tangents[0] * cexp(primals[0])


def complex_model(z, w):
    a = z * w  # CMUL
    b = cexp(a)  # CALL
    return fnp.abs(b + fg.lax.cond(True, lambda u: u * 2, lambda u: -u, w))  # COND


def test_complex_split_keeps_the_line_of_the_equation_it_replaces():
    z = np.array([1 + 2j, -0.5j], np.complex64)
    closed = fg.make_jaxpr(complex_model)(z, z)
    lines = {e.primitive.name: e.source_info.line for e in closed.jaxpr.eqns}
    split = complex_split.split_program(closed)
    assert not complex_split.has_complex(split)
    eqns = list(all_eqns(split))
    with_src = [e for e in eqns if e.source_info is not None]
    # only the boundary has no line: each complex argument's two planes sliced out
    boundary = [e for e in eqns if e.source_info is None]
    assert sorted(e.primitive.name for e in boundary) == ["reshape"] * 4 + ["slice"] * 4
    assert all(e.source_info.file == __file__ for e in with_src)
    found = {e.source_info.line for e in with_src}
    # the complex mul splits into real muls/adds on the mul's line; exp (inlined from the
    # custom_jvp call) into exp/cos/sin on exp's own line inside cexp; cond's branch too
    assert {line_of("CMUL"), line_of("CEXP"), line_of("COND")} <= found
    by_line = {}
    for e in with_src:
        by_line.setdefault(e.source_info.line, set()).add(e.primitive.name)
    assert {"mul", "sub", "add"} <= by_line[line_of("CMUL")]
    assert {"cos", "sin"} <= by_line[line_of("CEXP")]
    assert lines["mul"] == line_of("CMUL")
    # the program still computes the same thing
    want = np.abs(np.exp(z * z) + z * 2)
    got = fg.jit(complex_model)(z, z)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
