"""Run under ``mpiexec -n N``: every collective over a process axis, jitted for the CPU, against
numpy on the data of all ranks (each rank builds every rank's input from its rank number, so
the reference needs no communication). Each rank prints ``rank R: K checks passed``; a wrong
value raises, and fungrad.distributed's hook aborts the job with the rank named.

Also checked: a step with several collectives, gradients through them (psum, all_gather,
ppermute transposes), collectives inside ``fori_loop`` and ``scan`` bodies, and that the
compiled program calls MPI from native code (the plan lists MPI steps, the IR calls
``fg_MPI_*``, and there is no host callback)."""

from __future__ import annotations

import numpy as np

import fungrad as fg
from fungrad import distributed, lax

AXIS = "i"
fg.config.update("enable_x64", True)  # float64 and int64 operands keep their dtype
distributed.initialize()
RANK, N = distributed.process_index(), distributed.process_count()
checks = 0

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8, np.float16]


def value(r: int, shape, dtype, salt: int = 0) -> np.ndarray:
    """Rank ``r``'s input: small integers (exact in every dtype), distinct per rank."""
    size = int(np.prod(shape))
    v = (np.arange(size) * 7 + 3 * r + salt) % 11 + (r if dtype != np.uint8 else 0)
    if np.dtype(dtype).kind in "if" and np.dtype(dtype) != np.uint8:
        v = v - 5
    return v.reshape(shape).astype(dtype)


def every(shape, dtype, salt: int = 0) -> list[np.ndarray]:
    return [value(r, shape, dtype, salt) for r in range(N)]


def check(name: str, got, want) -> None:
    global checks
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(
            f"{name}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape} (rank {RANK})"
        )
    if want.dtype.kind == "f":
        ok = np.allclose(got, want, rtol=1e-5 if want.itemsize >= 4 else 1e-3, atol=1e-6)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        raise AssertionError(f"{name} on rank {RANK}:\n got {got}\nwant {want}")
    checks += 1


def jitted(f, *args):
    """``f`` jitted under the process axis, and its compiled text."""
    with distributed.bind_process_axis(AXIS):
        g = fg.jit(f)
        out = g(*args)
        text = g.lower(*args).compile().as_text()
    return out, text


def native(name: str, text: str, calls: tuple[str, ...]) -> None:
    """The program calls MPI from its native code, through no host callback."""
    global checks
    for c in calls:
        if f"@fg_MPI_{c}(" not in text:
            raise AssertionError(f"{name}: no native call of MPI_{c} in the program:\n{text}")
    if "fg_host_callback_fn" in text:
        raise AssertionError(f"{name}: the program calls back into Python:\n{text}")
    checks += 1


# -- reductions ---------------------------------------------------------------------------------
for dt in DTYPES:
    xs = every((3, 4), dt)
    for fname, red, call in (
        ("psum", np.sum, lax.psum),
        ("pmax", np.max, lax.pmax),
        ("pmin", np.min, lax.pmin),
    ):
        out, text = jitted(lambda x, call=call: call(x, AXIS), xs[RANK])
        want = red(np.stack(xs).astype(np.float64), axis=0).astype(dt)
        check(f"{fname} {np.dtype(dt).name}", out, want)
    native("psum", text, ("Allreduce",))

# several operands, a transposed (non-contiguous) operand, pmean, booleans
a, b = every((2, 3), np.float32), every((5,), np.int32, 1)
(s1, s2), _ = jitted(lambda x, y: lax.psum((x.T * 2, y), AXIS), a[RANK], b[RANK])
check("psum tree transposed", s1, 2 * np.sum(a, 0).T)
check("psum tree int", s2, np.sum(b, 0).astype(np.int32))
out, _ = jitted(lambda x: lax.pmean(x, AXIS), a[RANK])
check("pmean", out, np.mean(a, 0).astype(np.float32))
bools = [value(r, (6,), np.int32) > 0 for r in range(N)]
out, _ = jitted(lambda x: lax.psum(x, AXIS), bools[RANK])
check("psum bool", out, np.sum(bools, 0).astype(np.int32))

# axis_index_groups: pairs of ranks (n = 4) or each rank alone (n = 2)
groups = [[0, 2], [1, 3]] if N == 4 else [[0], [1]]
out, _ = jitted(lambda x: lax.psum(x, AXIS, axis_index_groups=groups), a[RANK])
mine = next(g for g in groups if RANK in g)
check("psum groups", out, np.sum([a[r] for r in mine], 0).astype(np.float32))

# -- all_gather ---------------------------------------------------------------------------------
for dt in (np.float32, np.int64, np.uint8, np.bool_, np.float16):
    xs = [x.astype(dt) for x in every((2, 3), np.int32 if dt == np.bool_ else dt)]
    for axis in (0, 1, 2):
        for tiled in (False, True):
            if tiled and axis == 2:
                continue
            out, text = jitted(
                lambda x, axis=axis, tiled=tiled: lax.all_gather(x, AXIS, axis=axis, tiled=tiled),
                xs[RANK],
            )
            want = np.concatenate(xs, axis) if tiled else np.stack(xs, axis)
            check(f"all_gather {np.dtype(dt).name} axis={axis} tiled={tiled}", out, want)
native("all_gather", text, ("Allgather",))

# -- psum_scatter -------------------------------------------------------------------------------
for dt in (np.float32, np.int32, np.float16):
    xs = every((N, 2 * N, N), dt)
    total = np.sum(np.stack(xs).astype(np.float64), 0).astype(dt)
    for dim in (0, 1, 2):
        if total.shape[dim] == N:
            out, text = jitted(
                lambda x, dim=dim: lax.psum_scatter(x, AXIS, scatter_dimension=dim), xs[RANK]
            )
            check(f"psum_scatter {np.dtype(dt).name} dim={dim}", out, np.take(total, RANK, dim))
        out, _ = jitted(
            lambda x, dim=dim: lax.psum_scatter(x, AXIS, scatter_dimension=dim, tiled=True),
            xs[RANK],
        )
        blk = total.shape[dim] // N
        want = np.take(total, range(RANK * blk, (RANK + 1) * blk), dim)
        check(f"psum_scatter tiled {np.dtype(dt).name} dim={dim}", out, want)
native("psum_scatter", text, ("Reduce_scatter_block",))

# -- all_to_all ---------------------------------------------------------------------------------
for dt in (np.float64, np.int8):
    xs = every((N, 2 * N, 3), dt)
    for split, concat in ((0, 0), (0, 2), (1, 0), (1, 2), (2, 1)):
        shape = xs[0].shape
        if shape[split] % N:
            continue
        for tiled in (False, True):
            if not tiled and shape[split] != N:
                continue
            out, text = jitted(
                lambda x, s=split, c=concat, t=tiled: lax.all_to_all(x, AXIS, s, c, tiled=t),
                xs[RANK],
            )
            blocks = [np.split(x, N, axis=split)[RANK] for x in xs]  # from each sender
            if tiled:
                want = np.concatenate(blocks, concat)
            else:
                want = np.stack([np.squeeze(bk, split) for bk in blocks], concat)
            check(f"all_to_all {np.dtype(dt).name} {split}->{concat} tiled={tiled}", out, want)
native("all_to_all", text, ("Alltoall",))

# -- ppermute / axis_index ----------------------------------------------------------------------
xs = every((4, 2), np.float32)
ring = [(r, (r + 1) % N) for r in range(N)]
out, text = jitted(lambda x: lax.ppermute(x, AXIS, ring), xs[RANK])
check("ppermute ring", out, xs[(RANK - 1) % N])
native("ppermute", text, ("Sendrecv",))
partial = [(0, N - 1)]
out, _ = jitted(lambda x: lax.ppermute(x, AXIS, partial), xs[RANK])
check("ppermute partial", out, xs[0] if RANK == N - 1 else np.zeros_like(xs[0]))
out, _ = jitted(lambda: lax.axis_index(AXIS))
check("axis_index", out, np.int32(RANK))


# -- a step with several collectives -------------------------------------------------------------
def step(x, w):
    h = lax.all_gather(x * lax.axis_index(AXIS).astype(x.dtype), AXIS, tiled=True)
    m = lax.pmax(w, AXIS)
    return lax.psum(h @ m, AXIS), lax.ppermute(w, AXIS, ring)


ws = every((3, 2), np.float32, 2)
xs = every((2, 3), np.float32)
(o1, o2), text = jitted(step, xs[RANK], ws[RANK])
h = np.concatenate([xs[r] * r for r in range(N)], 0)
check("step psum", o1, N * (h @ np.max(ws, 0)))
check("step ppermute", o2, ws[(RANK - 1) % N])
native("step", text, ("Allgather", "Allreduce", "Sendrecv"))

# -- gradients ----------------------------------------------------------------------------------
xs = every((3,), np.float32)
S = np.sum(xs, 0)
g, text = jitted(fg.grad(lambda x: (lax.psum(x, AXIS) ** 2).sum()), xs[RANK])
check("grad psum", g, 2 * N * S)
native("grad psum", text, ("Allreduce",))
c = value(7, (N, 3), np.float32)
g, _ = jitted(fg.grad(lambda x, c: (lax.all_gather(x, AXIS) * c).sum()), xs[RANK], c)
check("grad all_gather", g, N * c[RANK])
w_of = every((3,), np.float32, 5)
g, _ = jitted(fg.grad(lambda x, w: (lax.ppermute(x, AXIS, ring) * w).sum()), xs[RANK], w_of[RANK])
check("grad ppermute", g, w_of[(RANK + 1) % N])


# -- inside loops -------------------------------------------------------------------------------
def loop(x):
    return lax.fori_loop(0, 3, lambda i, v: lax.psum(v, AXIS) / N + 1.0, x)


def scan(x):
    def body(carry, _):
        s = lax.psum(carry, AXIS)
        return s / N + lax.axis_index(AXIS).astype(carry.dtype), s

    return lax.scan(body, x, None, length=3)


xs = every((4,), np.float32)
v = [x.astype(np.float64) for x in xs]
for _ in range(3):
    v = [np.sum(v, 0) / N + 1.0 for _ in range(N)]
out, text = jitted(loop, xs[RANK])
check("fori_loop psum", out, v[RANK].astype(np.float32))
native("fori_loop", text, ("Allreduce",))
carry, ys = [x.astype(np.float64) for x in xs], []
for _ in range(3):
    s = np.sum(carry, 0)
    ys.append(s)
    carry = [s / N + r for r in range(N)]
(cf, ys_got), text = jitted(scan, xs[RANK])
check("scan psum carry", cf, carry[RANK].astype(np.float32))
check("scan psum ys", ys_got, np.stack(ys).astype(np.float32))
native("scan", text, ("Allreduce",))

print(f"rank {RANK}: {checks} checks passed", flush=True)
