"""On-disk cache of compiled CPU object code, shared by every process of one user.

A compiled LLVM module is stored as the object file that ``TargetMachine.emit_object`` produced;
loading it into MCJIT takes ~1-2 ms where compiling takes 10-40 ms (LOWERING.md section 5).

- Key: sha256 of the IR text plus everything that changes the machine code: target triple, host
  cpu name and feature string, LLVM / llvmlite / fungrad versions and the pipeline options
  (:func:`cache_key`).
- Directory: ``$FUNGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/fungrad/<version>`` (``~/.cache``;
  ``~/Library/Caches`` on macOS), created with mode 0700. A directory that another user owns or
  that others can write is refused (a :class:`CacheWarning`): its objects would run as our code.
- Entries are written to a temporary file and renamed with ``os.replace`` (atomic across processes).
  Each holds a checksum, so a corrupt or truncated entry is counted, deleted and rebuilt, never
  loaded.
- A size cap (``FUNGRAD_CACHE_MAX_BYTES``, default 512 MiB) evicts the least recently used
  entries first (a hit refreshes the entry's mtime).
- ``FUNGRAD_DISABLE_CACHE=1`` or ``config.update("disable_compile_cache", True)`` turns it off.

Failures are never cached: the compiler only calls :meth:`ObjectCache.put` after a successful load.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import fungrad
from fungrad.config import config

__all__ = [
    "CacheWarning", "ObjectCache", "cache_enabled", "cache_key", "default_cache",
    "default_cache_dir",
]

_MAGIC = b"FGOBJ001"
_HEADER = struct.Struct("<8sI")  # magic, length of the JSON header that follows
_SUFFIX = ".fgo"
_PARTIAL = ".partial"  # temp files being written; left behind only by a crashed writer
DEFAULT_MAX_BYTES = 512 * 2**20


class CacheWarning(UserWarning):
    """The compile cache could not be used or written; compilation goes on without it."""


def cache_enabled() -> bool:
    """False when ``FUNGRAD_DISABLE_CACHE`` is set to a true value or the config option
    ``disable_compile_cache`` is on (read at every call, so tests can flip either)."""
    raw = os.environ.get("FUNGRAD_DISABLE_CACHE", "")
    if raw.strip().lower() in ("1", "true", "yes", "on"):
        return False
    return not config.disable_compile_cache


def default_cache_dir() -> Path:
    """``$FUNGRAD_CACHE_DIR`` if set, else the per-user cache dir plus ``fungrad/<version>``."""
    explicit = os.environ.get("FUNGRAD_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fungrad" / fungrad.__version__


def cache_key(ir_text: str, *, triple: str, cpu: str, features: str,
              pipeline: dict[str, object]) -> str:
    """sha256 hex digest naming the object code that ``ir_text`` compiles to on this host."""
    from fungrad.lowering import llvm_capi

    parts = {
        "triple": triple, "cpu": cpu, "features": features,
        "llvm": ".".join(map(str, llvm_capi.llvm_version())),
        "llvmlite": llvm_capi.llvmlite_version(), "fungrad": fungrad.__version__,
        "pipeline": sorted(pipeline.items()),
    }
    h = hashlib.sha256(json.dumps(parts, sort_keys=True).encode())
    h.update(b"\0")
    h.update(ir_text.encode())
    return h.hexdigest()


class ObjectCache:
    """Object files keyed by :func:`cache_key` in one directory, with hit/miss counters.

    ``get`` returns ``(object_bytes, meta)`` or None; ``put`` stores them. ``meta`` is a small
    JSON-able dict the compiler keeps beside the object (e.g. the external symbols it needs).
    """

    def __init__(self, directory: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES):
        self.directory = Path(directory)
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0
        self.corrupt = 0  # entries that failed their checksum (deleted, then rebuilt)
        self.writes = 0
        self.evictions = 0
        self._lock = threading.Lock()
        self._usable: bool | None = None  # directory checked lazily, once
        self._approx_bytes: int | None = None  # running total, rescanned when over the cap

    def __repr__(self) -> str:
        return (f"ObjectCache({str(self.directory)!r}, hits={self.hits}, misses={self.misses}, "
                f"corrupt={self.corrupt}, writes={self.writes}, evictions={self.evictions})")

    def path_for(self, key: str) -> Path:
        """The file that holds (or would hold) entry ``key``."""
        return self.directory / (key + _SUFFIX)

    def get(self, key: str) -> tuple[bytes, dict] | None:
        """The stored ``(object_bytes, meta)`` for ``key``, or None (a miss). A corrupt entry is
        deleted and counts as a miss and as ``corrupt``."""
        if not self._ensure_dir():
            return None
        path = self.path_for(key)
        try:
            blob = path.read_bytes()
        except OSError:
            self._count("misses")
            return None
        entry = _decode(blob, key)
        if entry is None:
            self._count("corrupt")
            self._count("misses")
            self.invalidate(key)
            return None
        self._count("hits")
        try:  # refresh the mtime: eviction drops the least recently used entries first
            os.utime(path)
        except OSError:
            pass
        return entry

    def put(self, key: str, data: bytes, meta: dict | None = None) -> None:
        """Store ``data`` under ``key`` atomically (temp file + ``os.replace``), then evict the
        oldest entries if the directory grew past ``max_bytes``. Write errors warn, never raise."""
        if not self._ensure_dir():
            return
        blob = _encode(key, data, meta or {})
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=_PARTIAL)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.replace(tmp, self.path_for(key))
            except BaseException:
                _unlink(Path(tmp))
                raise
        except OSError as e:
            warnings.warn(f"fungrad compile cache: cannot write {self.path_for(key)}: {e}",
                          CacheWarning, stacklevel=2)
            return
        self._count("writes")
        with self._lock:
            if self._approx_bytes is not None:
                self._approx_bytes += len(blob)
            over = self._approx_bytes is None or self._approx_bytes > self.max_bytes
        if over:
            self.evict()

    def invalidate(self, key: str) -> None:
        """Delete entry ``key`` if present (used for corrupt or unloadable entries)."""
        _unlink(self.path_for(key))

    def evict(self) -> None:
        """Delete least recently used entries until the directory is under 90% of the cap, and
        temp files that a crashed writer left behind more than an hour ago."""
        for p in self.directory.glob(".tmp-*" + _PARTIAL):
            try:
                if p.stat().st_mtime < time.time() - 3600:
                    _unlink(p)
            except OSError:
                continue
        entries = []
        for p in self.directory.glob("*" + _SUFFIX):
            try:
                st = p.stat()
            except OSError:
                continue  # removed by another process meanwhile
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        if total > self.max_bytes:
            entries.sort(key=lambda e: e[0])
            target = int(0.9 * self.max_bytes)
            for _, size, p in entries:
                if total <= target:
                    break
                if _unlink(p):
                    total -= size
                    self._count("evictions")
        with self._lock:
            self._approx_bytes = total

    def total_bytes(self) -> int:
        """Bytes currently held by entries in the directory."""
        return sum(p.stat().st_size for p in self.directory.glob("*" + _SUFFIX))

    def clear(self) -> None:
        """Delete every entry (counters are kept)."""
        for p in self.directory.glob("*" + _SUFFIX):
            _unlink(p)
        with self._lock:
            self._approx_bytes = 0

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def _ensure_dir(self) -> bool:
        if self._usable is None:
            with self._lock:
                if self._usable is None:
                    self._usable = self._check_dir()
        return self._usable

    def _check_dir(self) -> bool:
        d = self.directory
        try:
            d.parent.mkdir(parents=True, exist_ok=True)
            try:
                d.mkdir(mode=0o700)
                os.chmod(d, 0o700)  # mkdir's mode is filtered by the umask
            except FileExistsError:
                pass
            st = d.stat()
        except OSError as e:
            warnings.warn(f"fungrad compile cache disabled: cannot create {d}: {e}", CacheWarning,
                          stacklevel=4)
            return False
        getuid = getattr(os, "getuid", None)
        if getuid is not None and (st.st_uid != getuid() or st.st_mode & 0o022):
            warnings.warn(f"fungrad compile cache disabled: {d} is owned by another user or "
                          f"writable by others (mode {st.st_mode & 0o777:o}); use a private "
                          "directory (FUNGRAD_CACHE_DIR)", CacheWarning, stacklevel=4)
            return False
        return True


def _encode(key: str, data: bytes, meta: dict) -> bytes:
    header = json.dumps({"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                         "meta": meta}).encode()
    return _HEADER.pack(_MAGIC, len(header)) + header + data


def _decode(blob: bytes, key: str) -> tuple[bytes, dict] | None:
    """``(data, meta)`` if ``blob`` is a complete, intact entry for ``key``, else None."""
    if len(blob) < _HEADER.size:
        return None
    magic, hlen = _HEADER.unpack_from(blob)
    if magic != _MAGIC or _HEADER.size + hlen > len(blob):
        return None
    try:
        header = json.loads(blob[_HEADER.size:_HEADER.size + hlen])
    except ValueError:
        return None
    data = blob[_HEADER.size + hlen:]
    if (not isinstance(header, dict) or header.get("key") != key
            or header.get("size") != len(data)
            or header.get("sha256") != hashlib.sha256(data).hexdigest()):
        return None
    meta = header.get("meta")
    return data, meta if isinstance(meta, dict) else {}


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


_caches: dict[tuple[Path, int], ObjectCache] = {}
_caches_lock = threading.Lock()


def default_cache() -> ObjectCache | None:
    """The cache for the current :func:`default_cache_dir`, or None when caching is disabled.

    The directory and ``FUNGRAD_CACHE_MAX_BYTES`` are read at every call, so changing the
    environment switches to another (memoised) cache object with its own counters.
    """
    if not cache_enabled():
        return None
    directory = default_cache_dir()
    raw = os.environ.get("FUNGRAD_CACHE_MAX_BYTES", "").strip()
    if raw and not raw.isdigit():
        raise ValueError(f"FUNGRAD_CACHE_MAX_BYTES must be a number of bytes, got {raw!r}")
    max_bytes = int(raw) if raw else DEFAULT_MAX_BYTES
    with _caches_lock:
        cache = _caches.get((directory, max_bytes))
        if cache is None:
            cache = _caches[(directory, max_bytes)] = ObjectCache(directory, max_bytes)
        return cache
