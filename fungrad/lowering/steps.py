"""The program steps other than kernels and products, as plain data: control flow (cond,
while, scan), sort, host calls and dense linear algebra (Cholesky, triangular solve, LU, QR,
eigh, SVD, eig, Schur, Hessenberg).

A lowering rule that cannot be written element by element stores its operands in buffers and
appends one of these steps to the program (``fusion.Planner.add_step``). A step says what it
does and which buffers it reads and writes (``reads()``/``writes()``, for the liveness pass);
it carries no code. Each backend renders it with a function registered in its step-renderer
table (``lowering/render.py``): ``cpu/control_flow.py``, ``cpu/sort.py`` and
``cpu/host_call.py`` on the CPU, ``gpu/dispatches.py`` on the GPU. The planning that builds the
control-flow steps' sub-programs is in ``control_flow.py``; sort and host steps are built by
their lowering rules (``fungrad/lax/sort.py``, ``host_callback.lower_host_call``).

Control-flow steps hold *sub-programs* (lists of steps planned by a nested planner sharing
the parent's buffers). Loop carries live in memory, double-buffered (:class:`Carry`): each
iteration reads one buffer (the view ``cur``) and writes the other (``nxt``), and the two
swap on every back edge, so no iteration copies a carry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fungrad.lowering.fusion import Program
from fungrad.lowering.kernel import Buffer

__all__ = [
    "Carry",
    "Slice",
    "CondStep",
    "WhileStep",
    "ScanStep",
    "SortStep",
    "HostCallStep",
    "CollectiveStep",
    "CholeskyStep",
    "TriangularSolveStep",
    "FftStep",
    "LuStep",
    "QRStep",
    "GeqrfStep",
    "EighStep",
    "SVDStep",
    "GeevStep",
    "SchurStep",
    "HessenbergStep",
    "scratch_slots",
]


# -- control flow -----------------------------------------------------------------------------


@dataclass(eq=False)
class Carry:
    """One loop-carried value: ``home``/``spare`` hold it alternately; ``cur`` (the value an
    iteration reads) and ``nxt`` (the value it writes) are views whose addresses change every
    iteration. ``start_home``: the first iteration reads ``home`` (else ``spare``)."""

    home: Buffer
    spare: Buffer
    cur: Buffer
    nxt: Buffer
    start_home: bool


@dataclass(eq=False)
class Slice:
    """``view`` is row ``i`` (along the leading axis) of ``whole`` in iteration ``i``."""

    view: Buffer
    whole: Buffer


class _ControlStep:
    """What the planner needs of a control-flow step: ``reads()``/``writes()`` cover every
    buffer its sub-programs touch, with this step's views replaced by the buffers behind them.
    Sub-steps are final when the step is built, so both sets are computed once."""

    name: str

    def _collect(self, programs, backing: dict[int, tuple[Buffer, ...]], reads, writes):
        def real(bufs):
            out = set()
            for b in bufs:
                out.update(backing.get(b.id, (b,)))
            return out

        r, w = set(reads), set(writes)
        for steps in programs:
            for s in steps:
                r |= real(s.reads())
                w |= real(s.writes())
        self._reads, self._writes = r, w

    def reads(self) -> set[Buffer]:
        return self._reads

    def writes(self) -> set[Buffer]:
        return self._writes

    def sub_programs(self) -> list[list]:
        """The step lists this step runs (branches; a loop's cond and body)."""
        raise TypeError(f"{type(self).__name__} does not list its sub-programs")

    @staticmethod
    def _body_lines(title: str, steps: list) -> list[str]:
        """A sub-program's plan as text (``Program.describe`` shows it under the step)."""
        lines = Program(title, [], [], [], [], steps).describe().splitlines()[1:]
        return [f"{title}: {len(steps)} steps"] + lines


@dataclass(eq=False)
class CondStep(_ControlStep):
    """Run ``branches[clamp(index, 0, n - 1)]`` (``index`` a 0-d integer buffer); every
    branch writes all of ``outs``."""

    name: str
    index: Buffer
    branches: list[list]
    outs: list[Buffer]

    def __post_init__(self):
        self._collect(self.branches, {}, [self.index], self.outs)

    def sub_programs(self) -> list[list]:
        return list(self.branches)

    def describe_body(self) -> list[str]:
        return [
            line
            for i, steps in enumerate(self.branches)
            for line in self._body_lines(f"branch {i}", steps)
        ]


@dataclass(eq=False)
class WhileStep(_ControlStep):
    """``while pred(cond program): body program``, carries double-buffered; the cond program
    stores the predicate in the 0-d bool buffer ``pred``. The final value of a carry may be
    in its spare buffer: the renderer copies it home at exit."""

    name: str
    cond: list
    pred: Buffer
    body: list
    carries: list[Carry]

    def __post_init__(self):
        carries = self.carries
        backing = {v.id: (c.home, c.spare) for c in carries for v in (c.cur, c.nxt)}
        both = [b for c in carries for b in (c.home, c.spare)]
        self._collect([self.cond, self.body], backing, both, both + [self.pred])

    def sub_programs(self) -> list[list]:
        return [self.cond, self.body]

    def describe_body(self) -> list[str]:
        return self._body_lines("cond", self.cond) + self._body_lines("body", self.body)


@dataclass(eq=False)
class ScanStep(_ControlStep):
    """``for t in range(length)`` (row ``i = t``, or ``length - 1 - t`` when ``reverse``): the
    body program reads row ``i`` of each of ``xs`` and writes row ``i`` of each of ``ys``.
    The trip count is known, so each carry starts where its final value must land."""

    name: str
    body: list
    carries: list[Carry]
    xs: list[Slice]
    ys: list[Slice]
    length: int
    reverse: bool

    def __post_init__(self):
        carries = self.carries
        backing = {v.id: (c.home, c.spare) for c in carries for v in (c.cur, c.nxt)}
        backing.update({s.view.id: (s.whole,) for s in self.xs + self.ys})
        both = [b for c in carries for b in (c.home, c.spare)]
        self._collect(
            [self.body],
            backing,
            both + [s.whole for s in self.xs],
            both + [s.whole for s in self.ys],
        )

    def sub_programs(self) -> list[list]:
        return [self.body]

    def describe_body(self) -> list[str]:
        order = "reversed " if self.reverse else ""
        return self._body_lines(f"body ({order}length {self.length})", self.body)


# -- sort -------------------------------------------------------------------------------------

_PARALLEL_MIN_ELEMENTS = 1 << 15
_SCRATCH_MAX_BYTES = 1 << 26


@dataclass(eq=False)
class SortStep:
    """Sort ``inputs`` (buffers of one ``shape``) along ``dimension`` by the first ``num_keys``
    of them, writing the first ``k`` sorted positions of every input to ``outputs`` (plus the
    positions as int32 to ``index_output``, for top_k). ``order``: ``"sort"`` (JAX's order:
    -0.0 == 0.0, NaNs last) or ``"top_k"`` (descending in XLA's total order); both stable.
    ``scratch`` holds ``4 n`` int64 per slot (:func:`scratch_slots`)."""

    name: str
    inputs: list[Buffer]
    outputs: list[Buffer]
    scratch: Buffer
    shape: tuple[int, ...]
    dimension: int
    num_keys: int
    order: str  # "sort" or "top_k"
    k: int
    index_output: Buffer | None = None

    def reads(self) -> set[Buffer]:
        return set(self.inputs)

    def writes(self) -> set[Buffer]:
        outs = set(self.outputs) | {self.scratch}
        return outs | ({self.index_output} if self.index_output is not None else set())

    @property
    def slots(self) -> int:
        """Row ranges sorted concurrently, each with its own ``4 n`` scratch: the scratch
        buffer holds ``4 n * slots`` int64."""
        return self.scratch.size // (4 * self.shape[self.dimension]) if self.scratch.size else 1


def scratch_slots(shape: tuple[int, ...], dimension: int) -> int:
    """How many row ranges to sort concurrently: one unless there are several rows and enough
    work (about 2**15 elements), at most 16, and with at most 64 MiB of scratch in all."""
    n = shape[dimension]
    rows = math.prod(shape) // n if n else 0
    if rows < 2 or rows * n < _PARALLEL_MIN_ELEMENTS:
        return 1
    return max(1, min(rows, 16, _SCRATCH_MAX_BYTES // (32 * n)))


# -- host calls -------------------------------------------------------------------------------


@dataclass(eq=False)
class HostCallStep:
    """Call ``run(operand values) -> result values`` (numpy arrays) on the host: reads
    ``operands``, writes ``results``. ``index`` numbers the host steps of one program (its
    sub-programs included); ``what`` names the callback in plans and errors."""

    name: str
    index: int
    what: str
    run: object = field(repr=False)
    operands: list[Buffer] = field(default_factory=list)
    results: list[Buffer] = field(default_factory=list)

    def reads(self) -> set[Buffer]:
        return set(self.operands)

    def writes(self) -> set[Buffer]:
        return set(self.results)

    def describe_body(self) -> list[str]:
        return [f"calls {self.what}"]

    def execute(self, values: list[np.ndarray]) -> list[np.ndarray]:
        """The callback's results for the operand ``values``."""
        return self.run(values)


# -- collectives over processes ----------------------------------------------------------------


@dataclass(eq=False)
class CollectiveStep:
    """One MPI collective over a process axis (``lowering/collectives.py`` builds it), run by
    the backend's native code as one library call on contiguous buffers:

    * ``"allreduce"``: ``recv = op(send over the ranks)`` elementwise, ``op`` ``"sum"``,
      ``"max"`` or ``"min"`` (``MPI_Allreduce``);
    * ``"allgather"``: ``recv[k]`` = rank ``k``'s ``send`` (``MPI_Allgather``);
    * ``"reduce_scatter"``: ``recv`` = the sum over the ranks of block ``rank`` of ``send``
      (``MPI_Reduce_scatter_block``);
    * ``"sendrecv"``: ``send`` goes to rank ``dest`` and ``recv`` comes from rank ``source``
      (-1: none; ``MPI_Sendrecv``);
    * ``"alltoall"``: block ``k`` of ``send`` goes to rank ``k``, ``recv``'s block ``k`` comes
      from rank ``k`` (``MPI_Alltoall``).

    ``count``: elements per block (the whole buffer for allreduce and sendrecv, ``send`` for
    allgather, one rank's share otherwise). ``comm`` is the mpi4py communicator of the axis
    (split by ``axis_index_groups`` when the collective has groups), fixed at compile time;
    ``index`` numbers the collectives of one program (errors name the step)."""

    name: str
    index: int
    kind: str
    axis: str
    comm: object = field(repr=False)
    send: Buffer
    recv: Buffer
    count: int
    op: str | None = None
    dest: int = -1
    source: int = -1

    def reads(self) -> set[Buffer]:
        return {self.send}

    def writes(self) -> set[Buffer]:
        return {self.recv}

    def describe_body(self) -> list[str]:
        what = self.kind + (f" {self.op}" if self.op else "")
        peers = f" to {self.dest} from {self.source}" if self.kind == "sendrecv" else ""
        return [
            f"MPI {what}{peers} over process axis {self.axis!r}: "
            f"{self.count} x {self.send.dtype.name} per block"
        ]


# -- dense linear algebra ----------------------------------------------------------------------


class _LibraryStep:
    """The base of the steps a library runs (linear algebra, FFT): ``READS`` and ``WRITES``
    name the buffer fields the liveness pass sees (a None field, an output not computed, is
    left out)."""

    READS: tuple[str, ...] = ()
    WRITES: tuple[str, ...] = ()

    def reads(self) -> set[Buffer]:
        return {b for b in (getattr(self, n) for n in self.READS) if b is not None}

    def writes(self) -> set[Buffer]:
        return {b for b in (getattr(self, n) for n in self.WRITES) if b is not None}


@dataclass(eq=False)
class CholeskyStep(_LibraryStep):
    """The lower Cholesky factor of each of ``batch`` row-major ``n x n`` matrices of ``a``
    (only their lower triangle is read) into ``out``: upper triangle zero, the lower one NaN
    where the matrix is not positive definite. Backends with a library run it there (the CPU: LAPACK
    ``potrf``). ``complex``: the buffers hold complex (Hermitian) matrices as interleaved (re, im)
    pairs of their real dtype, ``[..., n, n, 2]`` (the CPU: ``cpotrf``/``zpotrf``)."""

    name: str
    a: Buffer
    out: Buffer
    batch: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("out",)


@dataclass(eq=False)
class TriangularSolveStep(_LibraryStep):
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for each of ``batch`` pairs:
    ``a`` is ``m x m`` (``m``: b's rows when ``left_side``, else its columns), read from its
    ``lower`` (or upper) triangle, unit diagonal when ``unit_diagonal``, ``op(a) = aᵀ`` when
    ``transpose_a``; ``b`` and ``out`` are ``rows x cols``. Row-major throughout. ``complex``:
    the buffers hold complex numbers as interleaved (re, im) pairs of their real dtype, and
    ``op(a) = aᴴ`` when ``transpose_a`` and ``conjugate_a``."""

    name: str
    a: Buffer
    b: Buffer
    out: Buffer
    batch: int
    rows: int
    cols: int
    left_side: bool
    lower: bool
    transpose_a: bool
    unit_diagonal: bool
    conjugate_a: bool = False
    complex: bool = False

    READS = ("a", "b")
    WRITES = ("out",)


@dataclass(eq=False)
class FftStep(_LibraryStep):
    """``batch`` one-dimensional complex-to-complex discrete Fourier transforms of length ``n``:
    ``out[b, k] = sum_j x[b, j] * exp(sign * 2 pi i j k / n)``, ``sign`` -1 (forward) or +1
    (``inverse``), with no ``1 / n`` scaling (the lowering rule scales). ``x`` and ``out`` are
    buffers of a real dtype (float32 or float64) holding complex numbers interleaved: logical
    shape ``[batch, n, 2]``, real and imaginary parts adjacent. ``inner`` > 1: the transforms
    run along the middle axis of ``[batch, n, inner, 2]`` (``batch * inner`` of them, no
    transposes). The CPU renders it as a call to its FFT library (``cpu/fft.py``)."""

    name: str
    x: Buffer
    out: Buffer
    batch: int
    n: int
    inverse: bool
    inner: int = 1

    READS = ("x",)
    WRITES = ("out",)


@dataclass(eq=False)
class LuStep(_LibraryStep):
    """LU with partial pivoting of each of ``batch`` row-major ``m x n`` matrices of ``a``:
    the packed factors into ``lu`` (unit-lower multipliers below the diagonal, U on and above),
    the 0-based row swaps into ``pivots`` (int32, ``min(m, n)`` per matrix) and the row
    permutation they make into ``permutation`` (int32, ``m`` per matrix). ``work`` holds one
    column-major matrix and ``ipiv`` the library's pivots (``min(m, n)`` 64-bit slots).
    Backends with a library run it there (the CPU: LAPACK ``getrf``). ``complex``: ``a``, ``lu``
    and ``work`` hold complex numbers as interleaved (re, im) pairs of their real dtype (the
    CPU: ``cgetrf``/``zgetrf``)."""

    name: str
    a: Buffer
    lu: Buffer
    pivots: Buffer
    permutation: Buffer
    work: Buffer
    ipiv: Buffer
    batch: int
    m: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("lu", "pivots", "permutation", "work", "ipiv")


@dataclass(eq=False)
class QRStep(_LibraryStep):
    """Householder QR of each of ``batch`` row-major ``m x n`` matrices of ``a``: ``q``
    (``m x m`` when ``full_matrices``, else ``m x k``) and ``r`` (``m x n``, else ``k x n``;
    k = min(m, n)), LAPACK's signs. Backends with a library run it there (the CPU: LAPACK
    ``geqrf`` then ``orgqr``). ``complex``: the buffers hold complex numbers as interleaved
    (re, im) pairs of their real dtype (``cgeqrf``/``cungqr``)."""

    name: str
    a: Buffer
    q: Buffer
    r: Buffer
    batch: int
    m: int
    n: int
    full_matrices: bool
    complex: bool = False

    READS = ("a",)
    WRITES = ("q", "r")


@dataclass(eq=False)
class GeqrfStep(_LibraryStep):
    """LAPACK's Householder QR of each of ``batch`` row-major ``m x n`` matrices of ``a``, in
    its own representation: ``packed`` (``m x n``: R on and above the diagonal, the reflectors
    below it) and ``taus`` (``min(m, n)`` per matrix). Backends with a library run it there
    (the CPU: LAPACK ``geqrf``). ``complex``: all three hold complex numbers as interleaved
    (re, im) pairs of their real dtype (``cgeqrf``)."""

    name: str
    a: Buffer
    packed: Buffer
    taus: Buffer
    batch: int
    m: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("packed", "taus")


@dataclass(eq=False)
class EighStep(_LibraryStep):
    """Eigen-decomposition of each of ``batch`` row-major symmetric ``n x n`` matrices of ``a``,
    read from their ``lower`` (or upper) triangle: eigenvectors as the columns of ``v``,
    eigenvalues ascending in ``w`` (``n`` per matrix); NaN in both where it did not converge.
    Backends with a library run it there (the CPU: LAPACK ``syevd``). ``complex``: ``a`` and
    ``v`` hold complex (Hermitian) matrices as interleaved (re, im) pairs, ``w`` stays real
    (``cheevd``)."""

    name: str
    a: Buffer
    v: Buffer
    w: Buffer
    batch: int
    n: int
    lower: bool
    complex: bool = False

    READS = ("a",)
    WRITES = ("v", "w")


@dataclass(eq=False)
class SVDStep(_LibraryStep):
    """Singular value decomposition of each of ``batch`` row-major ``m x n`` matrices of ``a``:
    ``s`` descending (k = min(m, n) per matrix) and, unless ``u`` and ``vt`` are None, ``u``
    (``m x m`` when ``full_matrices``, else ``m x k``) and ``vt`` (``n x n``, else ``k x n``);
    NaN in all where it did not converge. Backends with a library run it there (the CPU:
    LAPACK ``gesdd``). ``complex``: ``a``, ``u`` and ``vt`` hold complex numbers as
    interleaved (re, im) pairs, ``s`` stays real (``cgesdd``; ``vt`` is then ``Vᴴ``)."""

    name: str
    a: Buffer
    s: Buffer
    u: Buffer | None
    vt: Buffer | None
    batch: int
    m: int
    n: int
    full_matrices: bool
    complex: bool = False

    READS = ("a",)
    WRITES = ("s", "u", "vt")


@dataclass(eq=False)
class GeevStep(_LibraryStep):
    """Eigenvalues and (unless ``vl``/``vr`` are None) left/right eigenvectors of each of
    ``batch`` row-major general ``n x n`` matrices of ``a``, in LAPACK's real form: ``wr``,
    ``wi`` (``n`` per matrix) and the packed vectors as columns of ``vl``/``vr`` (a complex
    pair's vector is columns ``j`` and ``j + 1``); NaN in all where it did not converge.
    Backends with a library run it there (the CPU: LAPACK ``geev``). ``complex``: ``a``,
    ``vl``, ``vr`` and ``wr`` (the eigenvalues) hold complex numbers as interleaved (re, im)
    pairs, ``wi`` is None and the vectors are complex columns (``cgeev``)."""

    name: str
    a: Buffer
    wr: Buffer
    wi: Buffer | None
    vl: Buffer | None
    vr: Buffer | None
    batch: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("wr", "wi", "vl", "vr")


@dataclass(eq=False)
class SchurStep(_LibraryStep):
    """The Schur decomposition ``a = z t zᴴ`` of each of ``batch`` row-major ``n x n``
    matrices of ``a``, unsorted: the Schur form into ``t`` (quasi-upper-triangular for a real
    matrix, 2 x 2 blocks for complex conjugate eigenvalue pairs) and, unless ``z`` is None, the
    unitary Schur vectors into ``z``; NaN in both where it did not converge. Backends with a
    library run it there (the CPU: LAPACK ``gees``). ``complex``: the buffers hold complex
    numbers as interleaved (re, im) pairs of their real dtype (``cgees``/``zgees``)."""

    name: str
    a: Buffer
    t: Buffer
    z: Buffer | None
    batch: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("t", "z")


@dataclass(eq=False)
class HessenbergStep(_LibraryStep):
    """LAPACK's reduction of each of ``batch`` row-major ``n x n`` matrices of ``a`` to upper
    Hessenberg form, in its own representation: ``packed`` (the Hessenberg matrix on and above
    the first subdiagonal, the Householder vectors below it) and ``taus`` (``n - 1`` per
    matrix); NaN in both where LAPACK reports an error. Backends with a library run it there
    (the CPU: LAPACK ``gehrd``). ``complex``: the buffers hold complex numbers as interleaved
    (re, im) pairs of their real dtype (``cgehrd``/``zgehrd``)."""

    name: str
    a: Buffer
    packed: Buffer
    taus: Buffer
    batch: int
    n: int
    complex: bool = False

    READS = ("a",)
    WRITES = ("packed", "taus")
