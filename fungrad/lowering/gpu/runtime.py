"""The WebGPU runtime: adapter and device, buffers, pipelines, transfers.

One process-wide :class:`Runtime` (``runtime()``) owns the wgpu device. It is created on first
use, so ``import fungrad`` never touches the GPU.

Adapter choice: native APIs first (Vulkan, Metal, DirectX 12; OpenGL only as a last resort,
since it gets integer ``/`` and ``%`` of negatives wrong and lacks features), then discrete
over integrated over software GPUs. ``FUNGRAD_GPU_ADAPTER`` picks another: an adapter whose
description contains that text (case-insensitive), e.g. ``llvmpipe``, ``nvidia`` or
``opengl``; ``fungrad.devices()`` lists them.

Device arrays are plain ``array<u32>`` storage buffers (one 32-bit word per element; bool is
0/1; a complex64 element is two words, its real then imaginary part, the layout the complex
split's programs read), taken from a pool by size and handed back when their
:class:`DeviceBuffer` is dropped, so steady-state calls allocate nothing. Pipelines are
cached by WGSL source, the ``PIPELINE_CACHE`` most recently used ones (an executable holds its
own pipelines, so an evicted one stays alive while a function using it does, and is built
again for a new one).

Probes run at start-up: whether the adapter's ``fma`` rounds once (``fused_fma``), how
many loop iterations one invocation may run (``loop_limit``: 65535 on llvmpipe, whose guard
against endless loops silently ends them; None where loops run to completion), whether float32
subnormals are flushed to zero (``flushes_subnormals``, as WGSL allows), whether the shader
compiler contracts ``a * b + c`` into one fma (``contracts_mul_add``) and whether float32 division
is correctly rounded (``inexact_division``: kernels then divide through a corrected helper).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict

import numpy as np

_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2}
_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 2, "CPU": 3}
HOW_TO_GET_ONE = (
    "Install a Vulkan driver for your GPU (Linux: your vendor's driver, or Mesa's: "
    "`apt install mesa-vulkan-drivers`, which includes the software driver lavapipe), or "
    "use backend='cpu'."
)


class GpuUnavailableError(RuntimeError):
    """No usable WebGPU adapter (or wgpu itself is missing)."""


class GpuCompileError(RuntimeError):
    """A generated WGSL shader was rejected; the message names the kernel and a file holding
    the shader text."""


def _wgpu():
    try:
        import wgpu
    except ImportError as e:  # pragma: no cover - wgpu is a dependency
        raise GpuUnavailableError(
            f"backend='gpu' needs the wgpu package ({e}); `pip install wgpu`"
        ) from None
    return wgpu


def describe(info) -> str:
    """One line naming an adapter: device, backend and kind."""
    return (
        f"{info.get('device') or info.get('vendor') or 'unknown'} "
        f"({info.get('backend_type', '?')}, {info.get('adapter_type', '?')})"
    )


@contextlib.contextmanager
def _display_probe_env():
    """Give the native driver stack a private, empty ``XDG_RUNTIME_DIR`` while it looks for
    adapters, when the environment has no usable one (a headless machine).

    Adapter enumeration loads the OpenGL (EGL) and Vulkan drivers, whose window-system code asks
    libwayland for a display; with ``XDG_RUNTIME_DIR`` unset libwayland writes "error:
    XDG_RUNTIME_DIR is invalid or not set in the environment." to the process's stderr (native
    fd 2) several times, though fungrad draws nothing. An empty directory holds no display
    socket, so that probe fails quietly and the drivers go on headless, as they did before.
    This removes the cause rather than redirecting fd 2, which would also swallow real driver
    errors (and anything another thread writes meanwhile). A usable ``XDG_RUNTIME_DIR`` is left
    alone; the substitute is removed again afterwards, so subprocesses never see it.
    NB: ``os.environ`` changes the C environment of the whole process for that moment.
    """
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current):
        yield
        return
    private = tempfile.mkdtemp(prefix="fungrad-xdg-")  # mode 0700, as the spec requires
    os.environ["XDG_RUNTIME_DIR"] = private
    try:
        yield
    finally:
        if current is not None:
            os.environ["XDG_RUNTIME_DIR"] = current
        else:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        shutil.rmtree(private, ignore_errors=True)


_adapters_lock = threading.Lock()
_adapters: list | None = None


def adapters() -> list:
    """The wgpu adapters found, best first (see the module docstring)."""
    global _adapters
    with _adapters_lock:
        if _adapters is None:
            try:
                with _display_probe_env():
                    found = list(_wgpu().gpu.enumerate_adapters_sync())
            except Exception:  # a broken driver stack: no adapter, not a crash
                found = []
            found.sort(
                key=lambda a: (
                    _BACKEND_RANK.get(a.info.get("backend_type"), 1),
                    _TYPE_RANK.get(a.info.get("adapter_type"), 2),
                )
            )
            _adapters = found
        return list(_adapters)


def select_adapter():
    """The adapter ``backend='gpu'`` uses, or GpuUnavailableError saying how to get one."""
    found = adapters()
    want = os.environ.get("FUNGRAD_GPU_ADAPTER", "").strip().lower()
    if want:
        for a in found:
            if want in describe(a.info).lower() or want in str(a.info.get("vendor", "")).lower():
                return a
        names = "; ".join(describe(a.info) for a in found) or "none"
        raise GpuUnavailableError(
            f"FUNGRAD_GPU_ADAPTER={want!r} matches no adapter (found: {names})"
        )
    if not found:
        raise GpuUnavailableError(f"backend='gpu': no GPU adapter was found. {HOW_TO_GET_ONE}")
    return found[0]


class DeviceBuffer:
    """A pooled storage buffer holding ``words`` 32-bit words; returns to the pool when the
    last reference goes."""

    __slots__ = ("buffer", "words", "_rt", "__weakref__")

    def __init__(self, rt: Runtime, buffer, words: int):
        self.buffer, self.words, self._rt = buffer, words, rt

    def __del__(self):  # (a third of weakref.finalize's cost: a call allocates several)
        self._rt._release(self.buffer)


def _division_probe_operands() -> tuple[np.ndarray, np.ndarray]:
    """Float32 operand pairs whose quotients a correctly rounded division gets right: random
    significands over normal exponents (none near the subnormal range or overflow), and
    divisors of 2^126 and more (a reciprocal that is subnormal)."""
    rng = np.random.default_rng(20261126)
    x = (rng.uniform(1, 2, 120) * 2.0 ** rng.integers(-60, 60, 120)).astype(np.float32)
    y = (rng.uniform(1, 2, 120) * 2.0 ** rng.integers(-60, 60, 120)).astype(np.float32)
    hx = np.float32([3e38, np.inf, 1e30, 1.0, -2.5e38, 7.0, 1e-30, 3.3e38])
    hy = np.float32([3e38, 3e38, 3e38, 2.0**126, 1.5 * 2.0**126, -3.4e38, 2.0**127, 2.0**126])
    return np.concatenate([x, hx]), np.concatenate([y, hy])


class Runtime:
    """The device, the queue, and the caches (see the module docstring)."""

    POOL_KEEP = 8  # free buffers kept per size
    #: pipelines kept by WGSL source, least recently used evicted (each holds ~120 KB of
    #: compiled shader: without a bound, every dropped function's pipelines stayed forever)
    PIPELINE_CACHE = 128

    def __init__(self, adapter):
        wgpu = _wgpu()
        self.wgpu = wgpu
        self.adapter = adapter
        self.info = dict(adapter.info)
        lim = adapter.limits
        wanted = {
            k: lim[k]
            for k in (
                "max-storage-buffers-per-shader-stage",
                "max-storage-buffer-binding-size",
                "max-buffer-size",
            )
            if k in lim
        }
        # device timestamps for profiled builds (fungrad.profile): written inside a compute
        # pass around each dispatch where the adapter can, else at a pass's start and end
        features = [
            f for f in ("timestamp-query", "timestamp-query-inside-passes") if f in adapter.features
        ]
        with _display_probe_env():  # an OpenGL adapter looks for a display again
            self.device = adapter.request_device_sync(
                required_features=features, required_limits=wanted
            )
        #: "inside-passes", "passes" (timestampWrites of a whole pass) or None (host clock)
        self.timestamps = (
            None
            if "timestamp-query" not in features
            else "inside-passes"
            if "timestamp-query-inside-passes" in features
            else "passes"
        )
        self.timestamp_period = _timestamp_period(self.device.queue)  # ns per tick
        self.queue = self.device.queue
        self.max_bindings = int(wanted.get("max-storage-buffers-per-shader-stage", 8))
        self.max_binding_bytes = int(wanted.get("max-storage-buffer-binding-size", 1 << 27))
        self.usage = (
            wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        )
        self.lock = threading.Lock()
        self._free: dict[int, list] = {}
        self._pipelines: OrderedDict[str, object] = OrderedDict()
        self.transfers = {"upload": 0, "download": 0}  # counted, for residency tests
        self.fused_fma = (
            self._probe(
                "fma",
                "let a = b[0];\n  b[1] = fma(a, a, -(a * a));",
                np.array([1 + 2.0**-12, 0], np.float32),
            )[1]
            == 2.0**-24
        )
        # gallivm (llvmpipe/lavapipe; Mesa 22.3 measured) ends every invocation's loops
        # after 65535 iterations in all, silently (its endless-loop guard): count them
        count = self._probe(
            "loops",
            f"for (var i = 0u; i < {self.PROBE_LOOP}u; i++) {{\n    b[0] = b[0] + 1.0f;\n  }}",
            np.zeros(1, np.float32),
        )[0]
        self.loop_limit = int(count) if count < self.PROBE_LOOP else None
        # WGSL lets a device flush float32 subnormals (NVIDIA does): a subnormal result of
        # 2^-126 / 2 and a subnormal input 2^-140 times 2^20 (normal results either way)
        fl = self._probe(
            "subnormals",
            "b[2] = b[0] * 0.5f;\n  b[3] = b[1] * 1048576.0f;",
            np.array([2.0**-126, 2.0**-140, 1, 1], np.float32),
        )
        self.flushes_subnormals = bool(fl[2] == 0 or fl[3] == 0)
        # whether the compiler fuses a * b + c into one fma (SPIR-V from naga carries no
        # NoContraction, and NVIDIA's does): (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 fused, 0
        # as written; the product is used once in b[3], and twice for b[4] and b[5]
        con = self._probe(
            "contraction",
            "let p = b[0] * b[1];\n  b[3] = p + b[2];\n"
            "  let q = b[0] * b[1];\n  b[4] = q + b[2];\n  b[5] = q;",
            np.array([1 + 2.0**-12, 1 + 2.0**-12, -(1 + 2.0**-11), 1, 1, 1], np.float32),
        )
        self.contracts_mul_add = bool(con[3] != 0 or con[4] != 0)
        # whether a / b is correctly rounded (WGSL allows 2.5 ulp): NVIDIA's is off by up to
        # 2 ulp on random operands, and 0 or NaN for |b| >= 2^126 (its reciprocal is
        # subnormal and flushed: 3e38 / 3e38 gave 0, inf / 3e38 NaN on an H200)
        xs, ys = _division_probe_operands()
        n = xs.size
        got = self._probe(
            "division",
            f"for (var i = 0u; i < {n}u; i++) {{ b[{2 * n}u + i] = b[i] / b[{n}u + i]; }}",
            np.concatenate([xs, ys, np.zeros(n, np.float32)]),
        )[2 * n :]
        with np.errstate(all="ignore"):
            want = xs / ys
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        self.inexact_division = not bool(np.all(same))
        self.transfers = {"upload": 0, "download": 0}

    PROBE_LOOP = 1 << 18

    def _probe(self, name: str, body: str, data: np.ndarray) -> np.ndarray:
        """``data`` after one invocation of ``body`` on it (as ``b: array<f32>``)."""
        src = (
            "@group(0) @binding(0) var<storage, read_write> b: array<f32>;\n"
            f"@compute @workgroup_size(1)\nfn main() {{\n  {body}\n}}\n"
        )
        db = self.upload(data)
        pipeline = self.pipeline(f"probe_{name}", src)
        group = self.device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[
                {
                    "binding": 0,
                    "resource": {"buffer": db.buffer, "offset": 0, "size": db.buffer.size},
                }
            ],
        )
        encoder = self.device.create_command_encoder()
        cpass = encoder.begin_compute_pass()
        cpass.set_pipeline(pipeline)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(1)
        cpass.end()
        self.queue.submit([encoder.finish()])
        return self.download(db, data.shape, np.float32)

    @property
    def name(self) -> str:
        return describe(self.info)

    @property
    def cpu_adapter(self) -> bool:
        """Whether the adapter is a CPU (lavapipe, WARP): its invocations are threads of
        a few cores, so the parallel-reduction trees that pay on a GPU do not."""
        return self.info.get("adapter_type") == "CPU"

    # buffers
    def alloc(self, words: int) -> DeviceBuffer:
        """A buffer of at least ``words`` words (at least one: bindings may not be empty)."""
        size = max(4 * words, 16)
        size = -(-size // 256) * 256
        if size > self.max_binding_bytes:
            raise ValueError(
                f"backend='gpu': an array of {4 * words} bytes exceeds this "
                f"adapter's largest storage binding ({self.max_binding_bytes} "
                "bytes); split the array or use backend='cpu'"
            )
        buf = None
        with self.lock:
            free = self._free.get(size)
            while free and buf is None:
                buf = free.pop()
                if getattr(buf, "_internal", True) is None:
                    buf = None  # released after it was pooled (see _release)
        if buf is None:
            buf = self.device.create_buffer(size=size, usage=self.usage)
        return DeviceBuffer(self, buf, words)

    def _release(self, buf) -> None:
        # A DeviceBuffer collected in a reference cycle (an exception's traceback held it)
        # is finalised in the same collection as its wgpu buffer, in either order, and the
        # wgpu buffer's finaliser releases its handle (wgpu-py keeps it in ``_internal``):
        # finalised second, the DeviceBuffer would pool a dead handle, so it is skipped here;
        # finalised first, it pools a live one that dies a moment later, so ``alloc`` checks
        # again (the next upload into it failed on an H100, "must be a cdata pointer").
        if getattr(buf, "_internal", True) is None:
            return
        with self.lock:
            free = self._free.setdefault(buf.size, [])
            if len(free) < self.POOL_KEEP:
                free.append(buf)

    def upload(self, value: np.ndarray) -> DeviceBuffer:
        """A new device buffer holding ``value`` (one word per element, two for complex64)."""
        words = to_words(value)
        db = self.alloc(words.size)
        if words.size:
            self.queue.write_buffer(db.buffer, 0, words)
        self.transfers["upload"] += 1
        return db

    def download(self, db: DeviceBuffer, shape, dtype) -> np.ndarray:
        """The array of ``shape`` and ``dtype`` held by ``db`` (waits for pending work)."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64))
        self.transfers["download"] += 1
        if n == 0:
            return np.empty(shape, dtype)
        if dtype == np.bool_:
            raw = np.frombuffer(self.queue.read_buffer(db.buffer, 0, 4 * n), np.uint32)
            return (raw != 0).reshape(shape)
        raw = np.frombuffer(self.queue.read_buffer(db.buffer, 0, dtype.itemsize * n), np.uint32)
        return raw.view(dtype).reshape(shape).copy()

    def wait(self, db: DeviceBuffer) -> None:
        """Block until the submitted work writing ``db`` is done (a 4-byte read waits for
        the queue; wgpu's work-done callback is not usable from Python in wgpu 0.32)."""
        self.queue.read_buffer(db.buffer, 0, 4)

    # pipelines
    def pipeline(self, name: str, source: str):
        """The compute pipeline of WGSL ``source`` (cached: ``PIPELINE_CACHE``)."""
        with self.lock:
            p = self._pipelines.get(source)
            if p is not None:
                self._pipelines.move_to_end(source)
        if p is None:
            try:
                module = self.device.create_shader_module(code=source)
                p = self.device.create_compute_pipeline(
                    layout="auto", compute={"module": module, "entry_point": "main"}
                )
            except Exception as e:
                fd, path = tempfile.mkstemp(prefix=f"fungrad-{name}-", suffix=".wgsl")
                with os.fdopen(fd, "w") as f:
                    f.write(source)
                raise GpuCompileError(
                    f"jit(backend='gpu'): the WGSL shader of kernel {name} "
                    f"was rejected by {self.name}: {e}\nshader written to "
                    f"{path}"
                ) from None
            with self.lock:
                self._pipelines[source] = p
                while len(self._pipelines) > max(1, self.PIPELINE_CACHE):
                    self._pipelines.popitem(last=False)
        return p


def _timestamp_period(queue) -> float:
    """Nanoseconds per timestamp tick (``wgpuQueueGetTimestampPeriod``: wgpu-py 0.32 has no
    Python method for it; 1.0 where the call is unavailable, as on NVIDIA and lavapipe)."""
    try:
        from wgpu.backends.wgpu_native import _api

        period = float(_api.libf.wgpuQueueGetTimestampPeriod(queue._internal))
    except Exception:  # another wgpu build: raw ticks are nanoseconds on common drivers
        return 1.0
    return period if period > 0 else 1.0


def to_words(value: np.ndarray) -> np.ndarray:
    """``value`` as the device's 32-bit words (bool becomes 0/1; a complex64 element two
    words, real part first)."""
    a = np.ascontiguousarray(value)
    if a.dtype == np.bool_:
        return a.astype(np.uint32).ravel()
    if a.dtype.itemsize != (8 if a.dtype.kind == "c" else 4):
        raise TypeError(
            f"backend='gpu': {a.dtype.name} arrays cannot live on the GPU "
            "(WGSL has 32-bit types only: float32, int32, uint32, bool, and complex64 as "
            "two float32); convert to float32/int32/complex64 or use backend='cpu'"
        )
    return a.reshape(-1).view(np.uint32)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def runtime() -> Runtime:
    """The process-wide runtime (created on first use)."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime(select_adapter())
    return _runtime


def available() -> bool:
    """Whether ``backend='gpu'`` can run here."""
    try:
        runtime()
    except GpuUnavailableError:
        return False
    return True
