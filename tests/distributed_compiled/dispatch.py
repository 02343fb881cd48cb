"""Run under ``mpiexec -n N``: jit's hot path under process axes, and collectives on constant
operands, against numpy on all ranks' inputs. Each rank prints ``rank R: K checks passed``; a
wrong value raises, and fungrad.distributed's hook aborts the job with the rank named.

1. Calls under a process axis take jit's hot path (no lookup after the first call, so
   ``cache_info().hits`` stays 0) and give the collective's result; the same jitted function
   under another binding of the axis (a sub-communicator: pairs of ranks, or each rank alone)
   runs the program compiled for that binding, on the hot path's three tables (Arrays, static
   arguments, pytrees), and again the first one when rebound; with no axis bound it is the
   unbound-axis NameError, not a stale program.
2. Collectives whose operands are constants of the jitted program are never evaluated at
   compile time (constant folding): all ranks constant, or constant on rank 0 only while the
   other ranks pass a traced value (the case where a folding rank's compile-time MPI calls
   met another rank's compiled program); the program calls MPI natively on every rank. Two
   collectives of one operand on rank 0 only stay two there (not merged by CSE).
3. ``debug_nans`` with a NaN on rank 0 only: a program with collectives is not rerun op by op
   (a FloatingPointError on rank 0 saying so), one without is; the ranks' collectives stay in
   step."""

from __future__ import annotations

import numpy as np

import fungrad as fg
import fungrad.numpy as jnp
from fungrad import distributed, lax

AXIS = "i"
distributed.initialize()
RANK, N = distributed.process_index(), distributed.process_count()
WORLD = distributed._world()
checks = 0


def value(r: int, shape=(3,)) -> np.ndarray:
    """Rank ``r``'s input: small integers (exact sums), distinct per rank."""
    return (np.arange(int(np.prod(shape))) % 5 + 2 * r).reshape(shape).astype(np.float32)


def check(name: str, got, want) -> None:
    global checks
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
        raise AssertionError(f"{name} on rank {RANK}:\n got {got!r}\nwant {want!r}")
    checks += 1


XS = [value(r) for r in range(N)]
TOTAL = np.sum(XS, 0)
SUB = WORLD.Split(RANK % 2, RANK)  # ranks of the same parity (each rank alone when N = 2)
SUB_TOTAL = np.sum([XS[r] for r in range(RANK % 2, N, 2)], 0)
x = fg.device_put(XS[RANK])

# -- 1. the hot path under process axes --------------------------------------------------------
f = fg.jit(lambda v: lax.psum(v, AXIS))
opts = fg.jit(lambda v, k: lax.psum(v, AXIS) * k, static_argnums=1)
tree = fg.jit(lambda t: lax.psum(t["a"][0], AXIS) + t["b"])
t_arg = {"a": (x,), "b": x}
with distributed.bind_process_axis(AXIS):
    for i in range(4):
        check(f"hot psum call {i}", f(x), TOTAL)
        check(f"hot static call {i}", opts(x, 2.0), 2 * TOTAL)
        check(f"hot pytree call {i}", tree(t_arg), TOTAL + XS[RANK])
    for g, what in ((f, "psum"), (opts, "static"), (tree, "pytree")):
        info = g.cache_info()
        if (info.misses, info.hits) != (1, 0):
            raise AssertionError(f"{what}: the hot path was not taken under the axis: {info}")
for rebind in range(2):  # another binding of the name, then the first one again
    with distributed.bind_process_axis(AXIS, SUB):
        for i in range(2):
            check(f"sub psum {rebind}.{i}", f(x), SUB_TOTAL)
            check(f"sub static {rebind}.{i}", opts(x, 2.0), 2 * SUB_TOTAL)
            check(f"sub pytree {rebind}.{i}", tree(t_arg), SUB_TOTAL + XS[RANK])
    with distributed.bind_process_axis(AXIS):
        check(f"world psum again {rebind}", f(x), TOTAL)
        check(f"world static again {rebind}", opts(x, 2.0), 2 * TOTAL)
        check(f"world pytree again {rebind}", tree(t_arg), TOTAL + XS[RANK])
if f.cache_info().misses != 2:
    raise AssertionError(f"two bindings, two traces expected: {f.cache_info()}")
try:
    f(x)
except NameError as e:
    if "unbound axis name" not in str(e):
        raise
    checks += 1
else:
    raise AssertionError("a psum compiled under a process axis ran with no axis bound")

# -- 2. collectives on constants ---------------------------------------------------------------
with distributed.bind_process_axis(AXIS):
    zero = np.zeros(3, np.float32)
    both = fg.jit(lambda v: lax.psum(jnp.ones(3) * 2.0, AXIS) + v)
    check("psum of a constant", both(zero), np.full(3, 2.0 * N, np.float32))
    text = both.lower(zero).compile().as_text()
    if "@fg_MPI_Allreduce(" not in text:
        raise AssertionError(f"the constant psum was folded on rank {RANK}:\n{text}")
    checks += 1

    const = np.ones(3, np.float32)
    mixed = fg.jit(lambda v: lax.psum(const if RANK == 0 else v, AXIS))
    check("psum constant on rank 0", mixed(XS[RANK]), const + np.sum(XS[1:], 0))
    mixed_max = fg.jit(lambda v: lax.pmax(const * 100 if RANK == 0 else v, AXIS))
    check("pmax constant on rank 0", mixed_max(XS[RANK]), np.full(3, 100.0, np.float32))
    gather = fg.jit(lambda v: lax.all_gather(const if RANK == 0 else v, AXIS))
    check("all_gather constant on rank 0", gather(XS[RANK]), np.stack([const, *XS[1:]]))
    ring = [(r, (r + 1) % N) for r in range(N)]
    perm = fg.jit(lambda v: lax.ppermute(const if RANK == 0 else v, AXIS, ring))
    check("ppermute constant on rank 0", perm(XS[RANK]), const if RANK == 1 else XS[RANK - 1])

    def body(i, v):
        return v + lax.psum(const if RANK == 0 else v * 0 + 1.0, AXIS)

    loop = fg.jit(lambda v: lax.fori_loop(0, 3, body, v))
    check("fori_loop psum constant on rank 0", loop(zero), np.full(3, 3.0 * N, np.float32))

    # two psums of one operand on rank 0 only: not merged (CSE) there, two allreduces as on
    # the other ranks
    twice = fg.jit(lambda v, w: lax.psum(v, AXIS) + lax.psum(v if RANK == 0 else w, AXIS))
    check("psum twice on rank 0", twice(XS[RANK], 2 * XS[RANK]), TOTAL + 2 * TOTAL - XS[0])

# -- in place: an allreduce of an operand nothing else reads, not stored yet -------------------
IN_PLACE = f"inttoptr (i64 {int(distributed._mpi().IN_PLACE)} to ptr)"
with distributed.bind_process_axis(AXIS):
    x2 = np.stack([XS[RANK], XS[RANK] + 1])  # [2, 3]
    TOTAL2 = np.sum([np.stack([v, v + 1]) for v in XS], 0)
    for label, fn, want, in_place in (
        ("fused operand", lambda v: lax.psum(v * 2.0, AXIS), 2 * TOTAL2, True),
        ("transposed operand", lambda v: lax.psum(v.T, AXIS), TOTAL2.T, True),
        ("input operand", lambda v: lax.psum(v, AXIS), TOTAL2, False),
        (
            "operand read again",
            lambda v: lax.psum(v * 2.0, AXIS) - v * 2.0,
            2 * TOTAL2 - 2 * x2,
            False,
        ),
        (
            "two operands, one read again",
            lambda v: sum(lax.psum((v * 2.0, v * 3.0), AXIS)) + v * 3.0,
            5 * TOTAL2 + 3 * x2,
            True,
        ),
        (
            "float16 widened",
            lambda v: lax.psum(v.astype(np.float16), AXIS).astype(np.float32),
            TOTAL2,
            True,
        ),
        (
            "pmax",
            lambda v: lax.pmax(v + 1.0, AXIS),
            np.max([np.stack([v, v + 1]) for v in XS], 0) + 1,
            True,
        ),
    ):
        g = fg.jit(fn)
        check(f"in place: {label}", g(x2), want.astype(np.float32))
        text = g.lower(x2).compile().as_text()
        if (IN_PLACE in text) != in_place:
            raise AssertionError(f"{label}: in place {IN_PLACE in text}, want {in_place}:\n{text}")
        checks += 1

# -- 3. debug_nans: no op-by-op rerun of a program that communicates ----------------------------
fg.config.update("debug_nans", True)
with distributed.bind_process_axis(AXIS):
    y = np.where(np.arange(3) == 1, np.float32(np.nan if RANK == 0 else 1.0), np.float32(1.0))
    nan_step = fg.jit(lambda v, w: lax.psum(v, AXIS) * w)
    try:
        out = nan_step(XS[RANK], y)
    except FloatingPointError as e:
        if RANK != 0 or "communicates" not in str(e) or "index (1,)" not in str(e):
            raise
        checks += 1
    else:
        if RANK == 0:
            raise AssertionError("debug_nans missed the NaN of rank 0")
        check("debug_nans clean rank", out, TOTAL * y)
    local = fg.jit(lambda w: w * 2)  # no collective: rerun op by op as ever (this rank alone)
    try:
        local(y)
    except FloatingPointError as e:
        if RANK != 0 or "op by op" not in str(e):
            raise
        checks += 1
    else:
        if RANK == 0:
            raise AssertionError("debug_nans missed the NaN of rank 0 (no collective)")
        checks += 1
    # the ranks' collectives are still in step
    check("psum after debug_nans", f(x), TOTAL)
fg.config.update("debug_nans", False)

print(f"rank {RANK}: {checks} checks passed", flush=True)
