"""``python -m fungrad doctor``: what fungrad finds on this machine, for bug reports.

:func:`report` gathers the facts as a dict (one key per section); :func:`format_report` turns it
into the text the ``doctor`` command prints. The sections: versions (Python, numpy, llvmlite and
its LLVM, wgpu), the CPU code is compiled for (LLVM's host CPU name and the features it
targets), the BLAS/LAPACK library numpy bundles, the thread count, every GPU adapter (backend,
type, limits, and why it is not the one ``backend="gpu"`` uses), the compile cache (location,
size, permissions) and the configuration options in force.

Each section is gathered on its own: a part that is missing or broken (no wgpu adapter, no
BLAS, an llvmlite fungrad does not support) puts ``{"error": "<why>"}`` in its section instead
of stopping the report. Nothing here writes anything: the cache directory is inspected, never
created.
"""

from __future__ import annotations

import os
import platform
import stat
import sys

__all__ = ["format_report", "main", "report"]

#: The sections of :func:`report`, in the order they are printed.
SECTIONS = ("versions", "cpu", "blas", "threads", "gpu", "cache", "config")

#: wgpu adapter limits shown per adapter (the ones the GPU backend depends on).
_GPU_LIMITS = (
    "max-storage-buffers-per-shader-stage",
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-size-x",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroups-per-dimension",
)


def _versions() -> dict:
    import numpy

    from fungrad.version import __version__

    out = {
        "fungrad": __version__,
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
    }
    try:
        from fungrad.lowering.cpu import llvm_capi

        out["llvmlite"] = llvm_capi.llvmlite_version()
        out["llvm"] = ".".join(map(str, llvm_capi.llvm_version()))
    except Exception as e:  # noqa: BLE001 - a missing or unsupported llvmlite is a finding
        out.setdefault("llvmlite", None)
        out["llvm"] = None
        out["llvm_error"] = f"{type(e).__name__}: {e}"
    try:
        import wgpu

        out["wgpu"] = wgpu.__version__
    except ImportError as e:
        out["wgpu"] = None
        out["wgpu_error"] = f"{type(e).__name__}: {e}"
    return out


def _cpu_model() -> str | None:
    """The CPU's marketing name, where the OS says it (Linux /proc/cpuinfo, else platform)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _cpu() -> dict:
    from fungrad.lowering.cpu import compiler

    host = compiler.host()
    features = [f for f in host.features.split(",") if f]
    return {
        "model": _cpu_model(),
        "machine": platform.machine(),
        "llvm_triple": host.triple,
        "llvm_cpu": host.cpu,
        "features_enabled": sorted(f[1:] for f in features if f.startswith("+")),
        "features_disabled": sorted(f[1:] for f in features if f.startswith("-")),
    }


def _blas() -> dict:
    from fungrad.lowering.cpu import blas, lapack

    b = blas.find_blas()
    out = {
        "available": b.available,
        "reason": b.reason,
        "library": b.library_path,
        "int_bits": b.int_bits,
        "gemm_symbols": [b.sgemm_symbol, b.dgemm_symbol] if b.available else [],
        "config": b.config,
    }
    la = lapack.find_lapack()
    out["lapack"] = {
        "available": la.available,
        "reason": la.reason,
        "library": la.library_path,
        "routines": len(la.functions),
        "missing": sorted(f"{letter}{routine}" for routine, letter in la.missing),
    }
    return out


def _threads() -> dict:
    from fungrad.lowering.cpu import threads

    raw = os.environ.get("FUNGRAD_NUM_THREADS")
    return {
        "num_threads": threads.num_threads(),
        "source": "FUNGRAD_NUM_THREADS" if raw and raw.strip() else "CPU affinity",
        "os_cpu_count": os.cpu_count(),
    }


def _gpu() -> dict:
    from fungrad.lowering.gpu import runtime as gpu

    try:
        gpu._wgpu()
    except gpu.GpuUnavailableError as e:
        return {"adapters": [], "selected": None, "reason": str(e)}
    found = gpu.adapters()
    try:
        chosen, reason = gpu.select_adapter(), None
    except gpu.GpuUnavailableError as e:
        chosen, reason = None, str(e)
    wanted = os.environ.get("FUNGRAD_GPU_ADAPTER", "").strip()
    listed = []
    for i, a in enumerate(found):
        info = dict(a.info)
        try:
            limits = {k: int(a.limits[k]) for k in _GPU_LIMITS if k in a.limits}
        except Exception as e:  # noqa: BLE001 - a driver that cannot say: report it
            limits = {"error": f"{type(e).__name__}: {e}"}
        if a is chosen:
            why_not = None
        elif chosen is None:
            why_not = reason
        elif wanted:
            why_not = f"FUNGRAD_GPU_ADAPTER={wanted!r} picked adapter {found.index(chosen)}"
        else:
            why_not = (
                f"adapter {found.index(chosen)} ranks first (native API over OpenGL, then "
                "discrete over integrated over software); FUNGRAD_GPU_ADAPTER picks another"
            )
        listed.append(
            {
                "index": i,
                "description": gpu.describe(info),
                "device": info.get("device"),
                "vendor": info.get("vendor"),
                "backend": info.get("backend_type"),
                "type": info.get("adapter_type"),
                "driver": info.get("description") or None,
                "limits": limits,
                "used": a is chosen,
                "why_not_used": why_not,
            }
        )
    return {
        "adapters": listed,
        "selected": None if chosen is None else found.index(chosen),
        "reason": reason,
        "FUNGRAD_GPU_ADAPTER": wanted or None,
    }


def _cache() -> dict:
    from fungrad.lowering.cpu import cache

    directory = cache.default_cache_dir()
    out = {
        "enabled": cache.cache_enabled(),
        "libraries_enabled": cache.cache_enabled(library=True),
        "directory": str(directory),
        "exists": directory.is_dir(),
        "max_bytes": cache._max_bytes_from_env(),
    }
    if not out["exists"]:
        out["note"] = "created on the first compile" if out["enabled"] else None
        return out
    st = directory.stat()
    getuid = getattr(os, "getuid", None)
    entries = list(directory.glob("*" + cache._SUFFIX))
    out.update(
        {
            "entries": len(entries),
            "bytes": sum(p.stat().st_size for p in entries),
            "mode": f"{stat.S_IMODE(st.st_mode):o}",
            "owned_by_you": None if getuid is None else st.st_uid == getuid(),
            "writable_by_others": bool(st.st_mode & 0o022),
            "writable": os.access(directory, os.W_OK),
            "has_key": (directory / cache.KEY_FILE).is_file(),
        }
    )
    if out["owned_by_you"] is False or out["writable_by_others"]:
        out["note"] = "jit will not use it: it must be private to you (mode 700)"
    return out


def _config() -> dict:
    from fungrad.config import _OPTIONS, config

    out = {name: getattr(config, name) for name in _OPTIONS}
    out["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("FUNGRAD_", "JAX_"))}
    return out


_GATHER = {
    "versions": _versions,
    "cpu": _cpu,
    "blas": _blas,
    "threads": _threads,
    "gpu": _gpu,
    "cache": _cache,
    "config": _config,
}


def report() -> dict:
    """What fungrad finds on this machine, one dict per section (:data:`SECTIONS`): versions,
    cpu, blas (with lapack), threads, gpu, cache and config. A section that cannot be gathered
    holds ``{"error": "<type>: <message>"}`` instead; the others are still filled."""
    out = {}
    for name in SECTIONS:
        try:
            out[name] = _GATHER[name]()
        except Exception as e:  # noqa: BLE001 - one broken part must not hide the rest
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def _lines(value, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:")
                out += _lines(v, indent + 2)
            else:
                out.append(f"{pad}{k}: {'-' if v is None or v in ('', [], {}) else v}")
        return out
    if isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value):
            return [f"{pad}{' '.join(map(str, value))}"]
        out = []
        for v in value:
            out.append(f"{pad}-")
            out += _lines(v, indent + 2)
        return out
    return [f"{pad}{value}"]


def format_report(facts: dict | None = None) -> str:
    """The text ``python -m fungrad doctor`` prints: :func:`report` (or ``facts``), one
    ``[section]`` heading per section."""
    facts = report() if facts is None else facts
    out = []
    for name, section in facts.items():
        out.append(f"[{name}]")
        out += _lines(section, 2)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the report; ``--json`` prints it as JSON instead. Returns the exit status."""
    import json

    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--json"]):
        print("usage: python -m fungrad doctor [--json]", file=sys.stderr)
        return 2
    facts = report()
    if argv:
        print(json.dumps(facts, indent=2, default=str))
    else:
        print(format_report(facts), end="")
    return 0
