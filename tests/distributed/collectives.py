"""Run under ``mpiexec -n N``: every collective over a multi-process pmap's axis, their
gradients, vmap and scan inside the pmap. ``python collectives.py OUT MODE`` writes this
rank's results to ``OUT/MODE_<rank>.npz``; MODE is ``jit`` (compiled) or ``eager``
(``disable_jit``). tests/test_distributed.py checks them against numpy on the gathered
inputs (tests/distributed/_data.py)."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _data import DTYPES, local  # noqa: E402

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402
from fungrad import lax  # noqa: E402

A = "data"


def run(fn, *xs):
    """``fn`` over the processes: each passes its local value with a leading axis of 1."""
    out = fg.pmap(fn, axis_name=A)(*[np.asarray(x)[None] for x in xs])
    return fg.tree_util.tree_map(lambda o: np.asarray(o)[0], out)


def _derivative_checks(mode: str, rank: int, n: int) -> dict:
    """JVP against central differences, and the global VJP/JVP identity, for a function
    mixing psum, all_gather, ppermute and pmax: ``{name: array}``."""
    ring = [(i, (i + 1) % n) for i in range(n)]

    def f(u):
        s = lax.psum(u * u, A) * 0.1
        g = lax.all_gather(u, A)[n - 1]
        p = lax.ppermute(fnp.sin(u), A, ring)
        return fnp.tanh(s) * g + p * lax.pmax(u, A)

    out = {}
    with fg.enable_x64(True):
        x = local("dx", rank).astype(np.float64)
        t = local("dt", rank).astype(np.float64)
        ct = local("dct", rank).astype(np.float64)
        with fg.distributed.bind_process_axis(A):
            g = f if mode == "eager" else fg.jit(f)
            _, jt = fg.jvp(g, (x,), (t,))
            eps = 1e-6
            fd = (np.asarray(g(x + eps * t)) - np.asarray(g(x - eps * t))) / (2 * eps)
            _, vjp = fg.vjp(g, x)
            (xbar,) = vjp(ct)
            out["jvp"], out["jvp_fd"] = np.asarray(jt), fd
            out["vjp_dot"] = np.asarray(lax.psum(fnp.sum(xbar * t), A))
            out["jvp_dot"] = np.asarray(lax.psum(fnp.sum(ct * jt), A))
    return out


def main(out_dir: str, mode: str):
    fg.distributed.initialize()
    fg.config.update("enable_x64", True)  # float64 and int64 operands stay 64-bit
    rank, n = fg.process_index(), fg.process_count()
    res: dict = {}
    res["axis_index"] = run(lambda x: lax.axis_index(A) + 0 * x, np.int32(0))
    res["axis_size"] = run(lambda x: x + lax.axis_size(A), np.int32(0))
    for dt in DTYPES:
        x = local("red_" + dt, rank, dtype=dt)
        res["psum_" + dt] = run(lambda v: lax.psum(v, A), x)
        res["pmax_" + dt] = run(lambda v: lax.pmax(v, A), x)
        res["pmin_" + dt] = run(lambda v: lax.pmin(v, A), x)
        res["gather_" + dt] = run(lambda v: lax.all_gather(v, A), x)
    x = local("x", rank)
    res["pmean"] = run(lambda v: lax.pmean(v, A), x)
    res["psum_bool"] = run(lambda v: lax.psum(v > 0, A), x)
    res["gather_bool"] = run(lambda v: lax.all_gather(v > 0, A, axis=1), x)
    groups = [[2 * i, 2 * i + 1] for i in range(n // 2)]
    res["psum_groups"] = run(lambda v: lax.psum(v, A, axis_index_groups=groups), x)
    res["pmax_groups"] = run(lambda v: lax.pmax(v, A, axis_index_groups=groups), x)
    res["gather_ax1"] = run(lambda v: lax.all_gather(v, A, axis=1), x)
    res["gather_tiled"] = run(lambda v: lax.all_gather(v, A, tiled=True), x)
    res["gather_tiled_ax1"] = run(lambda v: lax.all_gather(v, A, axis=1, tiled=True), x)
    xs = local("xs", rank, shape=(n, 3))
    res["scatter"] = run(lambda v: lax.psum_scatter(v, A), xs)
    xt = local("xt", rank, shape=(3, 2 * n))
    res["scatter_tiled_1"] = run(
        lambda v: lax.psum_scatter(v, A, scatter_dimension=1, tiled=True), xt
    )
    res["ring"] = run(lambda v: lax.ppermute(v, A, [(i, (i + 1) % n) for i in range(n)]), x)
    res["partial_perm"] = run(lambda v: lax.ppermute(v, A, [(0, n - 1)]), x)
    res["a2a"] = run(lambda v: lax.all_to_all(v, A, 0, 1), xs)
    res["a2a_tiled"] = run(lambda v: lax.all_to_all(v, A, 1, 0, tiled=True), xt)
    res["pbroadcast"] = run(lambda v: lax.pbroadcast(v, A, n - 1), x)

    # gradients through collectives (JAX's rules: psum's transpose is psum, ...)
    c = local("c", rank)
    res["grad_psum"] = run(
        lambda v, w: fg.grad(lambda u: fnp.sum(fnp.sin(lax.psum(u, A)) * w))(v), x, c
    )
    res["grad_gather"] = run(
        lambda v, w: fg.grad(lambda u: fnp.sum(lax.all_gather(u, A) * w[None]))(v), x, c
    )
    ring = [(i, (i + 1) % n) for i in range(n)]
    res["grad_ring"] = run(
        lambda v, w: fg.grad(lambda u: fnp.sum(lax.ppermute(u, A, ring) * w))(v), x, c
    )
    res["grad_pmean_sq"] = run(lambda v: fg.grad(lambda u: fnp.sum(lax.pmean(u * u, A)))(v), x)

    # derivatives against finite differences. check_grads' per-process dot-product test
    # does not hold across processes (the transpose of psum is psum: a rank's VJP collects
    # every rank's cotangents), so the identity is checked globally: the psum over ranks of
    # <vjp(ct), t> equals the psum of <ct, jvp(t)>. Float64: central differences.
    res.update(_derivative_checks(mode, rank, n))

    # vmap inside the pmap: data parallel over rows, a vmap name shadowing the process
    # axis (the innermost binding wins), and a psum over both
    res["vmap_rows"] = run(lambda v: fg.vmap(lambda r: lax.psum(r, A))(v), x)
    res["vmap_shadow"] = run(lambda v: fg.vmap(lambda r: lax.psum(r, A), axis_name=A)(v), x)
    res["vmap_both"] = run(lambda v: fg.vmap(lambda r: lax.psum(r, ("i", A)), axis_name="i")(v), x)

    # scan with a psum in its body: a running sum of the rows' global sums
    def scanned(v):
        def body(carry, row):
            carry = carry + lax.psum(row, A)
            return carry, carry

        return lax.scan(body, fnp.zeros(v.shape[1:], v.dtype), v)[1]

    res["scan_psum"] = run(scanned, x)
    np.savez(os.path.join(out_dir, f"{mode}_{rank}.npz"), **res)
    fg.distributed.barrier()


if __name__ == "__main__":
    out, mode = sys.argv[1], sys.argv[2]
    with fg.disable_jit() if mode == "eager" else contextlib.nullcontext():
        main(out, mode)
