"""On-disk cache of compiled CPU object code, shared by every process of one user.

A compiled LLVM module is stored as the object file that ``TargetMachine.emit_object`` produced;
loading it into MCJIT takes ~1-2 ms where compiling takes 10-40 ms (LOWERING.md section 5).

- Key: sha256 of the IR text plus everything that changes the machine code: target triple, host
  cpu name and feature string, LLVM / llvmlite / fungrad versions and the pipeline options
  (:func:`cache_key`).
- Directory: ``$FUNGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/fungrad/<version>`` (``~/.cache``;
  ``~/Library/Caches`` on macOS). Every directory fungrad creates on the way (``~/.cache`` too,
  as XDG asks) is made 0700 whatever the umask, and an existing cache directory of ours that
  others can read (0755) is tightened to 0700 (at the default location also its parent
  ``fungrad``); other parents that exist already are left alone. A
  directory that another user owns or that others can write is refused (a
  :class:`CacheWarning`): its objects would run as our code.
- Entries are written to a temporary file and renamed with ``os.replace`` (atomic across processes).
  Each entry (header, metadata and object alike) is signed with an HMAC-SHA256 under a per-user
  secret key, the file ``key`` (32 random bytes, mode 0600) in the cache directory. An entry
  whose tag does not verify (truncated, flipped bits, edited metadata, or an object someone
  else wrote, even with its checksum recomputed) is counted as ``corrupt``, deleted and rebuilt,
  never loaded: only objects this user's fungrad wrote ever run. (Writing needs the owner's 0700
  directory already; the key is defence in depth.)
- A size cap (``FUNGRAD_CACHE_MAX_BYTES``: bytes, or with a unit ``K``/``M``/``G``/``T``
  (powers of 1024, optionally followed by ``B`` or ``iB``: ``512M``, ``1.5GiB``); default 512 MiB)
  evicts the least recently used entries first (a hit refreshes the entry's mtime). A value
  that is not a size warns (:class:`CacheWarning`) and the default is used.
- ``FUNGRAD_DISABLE_CACHE=1`` or ``config.update("disable_compile_cache", True)`` turns it off
  for programs. fungrad's own *libraries* (the matrix product, the FFTs, the thread pool, the
  large-argument sin/cos/tan: fixed code that no program changes, compiled on first use where
  JAX ships its kernels prebuilt) stay cached, as an install's prebuilt files would be;
  ``FUNGRAD_DISABLE_CACHE=all`` turns the cache off for them too (each process then compiles
  the libraries it uses again: ~55 ms for the matrix product).

Failures are never cached: the compiler only calls :meth:`ObjectCache.put` after a successful load.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import struct
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from fungrad.config import config
from fungrad.version import __version__

__all__ = [
    "CacheWarning",
    "ObjectCache",
    "cache_enabled",
    "cache_key",
    "default_cache",
    "default_cache_dir",
    "parse_size",
]

_MAGIC = b"FGOBJ002"
_HEADER = struct.Struct("<8sI")  # magic, length of the JSON header that follows
_TAG_BYTES = 32  # the HMAC-SHA256 tag that ends every entry
_SUFFIX = ".fgo"
_PARTIAL = ".partial"  # temp files being written; left behind only by a crashed writer
KEY_FILE = "key"
"""The per-user secret that signs entries, in the cache directory (mode 0600)."""
_KEY_BYTES = 32
DEFAULT_MAX_BYTES = 512 * 2**20


class CacheWarning(UserWarning):
    """The compile cache could not be used or written; compilation goes on without it."""


def cache_enabled(library: bool = False) -> bool:
    """Whether compiled programs (``library=False``) or fungrad's own libraries (True) are
    cached: programs not when ``FUNGRAD_DISABLE_CACHE`` is set to a true value or ``all``, or
    the config option ``disable_compile_cache`` is on; libraries only not with ``all``. Read at
    every call, so tests can flip either."""
    raw = os.environ.get("FUNGRAD_DISABLE_CACHE", "").strip().lower()
    if raw == "all":
        return False
    if library:
        return True
    if raw in ("1", "true", "yes", "on"):
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
    return base / "fungrad" / __version__


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])(?:i?b)?|b)?\s*", re.IGNORECASE)
_UNIT = {None: 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit ``K``, ``M``, ``G`` or ``T`` (powers of
    1024), optionally followed by ``B`` or ``iB``, any case (``4000``, ``512M``, ``1.5GiB``).
    Raises ValueError for anything else."""
    m = _SIZE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"{text!r} is not a size: write a number of bytes, optionally with a "
            "unit K, M, G or T (powers of 1024), e.g. 512M or 2G"
        )
    unit = m.group(2).lower() if m.group(2) else None
    return int(float(m.group(1)) * _UNIT[unit])


def cache_key(
    ir_text: str, *, triple: str, cpu: str, features: str, pipeline: dict[str, object]
) -> str:
    """sha256 hex digest naming the object code that ``ir_text`` compiles to on this host."""
    from fungrad.lowering.cpu import llvm_capi

    parts = {
        "triple": triple,
        "cpu": cpu,
        "features": features,
        "llvm": ".".join(map(str, llvm_capi.llvm_version())),
        "llvmlite": llvm_capi.llvmlite_version(),
        "fungrad": __version__,
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

    def __init__(
        self,
        directory: str | os.PathLike,
        max_bytes: int = DEFAULT_MAX_BYTES,
        own_parent: bool = False,
    ):
        self.directory = Path(directory)
        self.max_bytes = int(max_bytes)
        self.own_parent = own_parent  # the parent is fungrad's too (``.../fungrad/<version>``)
        self.hits = 0
        self.misses = 0
        self.corrupt = 0  # entries that failed their checksum (deleted, then rebuilt)
        self.writes = 0
        self.evictions = 0
        self._lock = threading.Lock()
        self._secret: bytes | None = None  # the signing key, once the directory is checked
        self._checked = False  # the directory is checked lazily, once
        self._approx_bytes: int | None = None  # running total, rescanned when over the cap

    def __repr__(self) -> str:
        return (
            f"ObjectCache({str(self.directory)!r}, hits={self.hits}, misses={self.misses}, "
            f"corrupt={self.corrupt}, writes={self.writes}, evictions={self.evictions})"
        )

    def path_for(self, key: str) -> Path:
        """The file that holds (or would hold) entry ``key``."""
        return self.directory / (key + _SUFFIX)

    def get(self, key: str) -> tuple[bytes, dict] | None:
        """The stored ``(object_bytes, meta)`` for ``key``, or None (a miss). A corrupt entry is
        deleted and counts as a miss and as ``corrupt``."""
        secret = self._ensure_dir()
        if secret is None:
            return None
        path = self.path_for(key)
        try:
            blob = path.read_bytes()
        except OSError:
            self._count("misses")
            return None
        entry = _decode(blob, key, secret)
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
        secret = self._ensure_dir()
        if secret is None:
            return
        blob = _encode(key, data, meta or {}, secret)
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
            warnings.warn(
                f"fungrad compile cache: cannot write {self.path_for(key)}: {e}",
                CacheWarning,
                stacklevel=2,
            )
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

    def _ensure_dir(self) -> bytes | None:
        """The signing key, or None when the directory cannot be used (checked once)."""
        if not self._checked:
            with self._lock:
                if not self._checked:
                    self._secret = self._check_dir()
                    self._checked = True
        return self._secret

    def _check_dir(self) -> bytes | None:
        d = self.directory
        try:
            _make_private_dirs(d)
            st = d.stat()
        except OSError as e:
            warnings.warn(
                f"fungrad compile cache disabled: cannot create {d}: {e}",
                CacheWarning,
                stacklevel=5,
            )
            return None
        getuid = getattr(os, "getuid", None)
        if getuid is not None and (st.st_uid != getuid() or st.st_mode & 0o022):
            warnings.warn(
                f"fungrad compile cache disabled: {d} is owned by another user or "
                f"writable by others (mode {st.st_mode & 0o777:o}); use a private "
                "directory (FUNGRAD_CACHE_DIR)",
                CacheWarning,
                stacklevel=5,
            )
            return None
        try:  # ours, but others may list it: tighten it (and fungrad's own parent)
            for own in (d, d.parent) if self.own_parent else (d,):
                _tighten(own)
        except OSError as e:
            warnings.warn(
                f"fungrad compile cache disabled: cannot make {d} private: {e}",
                CacheWarning,
                stacklevel=5,
            )
            return None
        try:
            return _load_key(d)
        except (OSError, _KeyError) as e:
            warnings.warn(f"fungrad compile cache disabled: {e}", CacheWarning, stacklevel=5)
            return None


def _tighten(d: Path) -> None:
    """chmod ``d`` 0700 if it is ours and others have any access to it."""
    getuid = getattr(os, "getuid", None)
    st = d.stat()
    if getuid is not None and st.st_uid == getuid() and st.st_mode & 0o077:
        os.chmod(d, 0o700)


def _make_private_dirs(d: Path) -> None:
    """Create ``d`` and its missing parents, each 0700 whatever the umask (XDG's rule for the
    cache base directory); directories that exist already are not touched here."""
    missing = []
    p = d
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:  # another process made it meanwhile
            continue
        os.chmod(p, 0o700)  # mkdir's mode is filtered by the umask (0o700 & ~umask)


class _KeyError(Exception):
    """The key file cannot be trusted and cannot be replaced."""


def _load_key(d: Path) -> bytes:
    """The signing key in ``d/key``, made now if there is none (32 random bytes, 0600, written
    to a temp file and hard-linked into place, so concurrent processes agree on one key). A key
    file that others could read or of the wrong size is replaced by a new one (a warning: the
    entries signed with the old key are then rebuilt); one another user owns is refused."""
    path = d / KEY_FILE
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            _write_key(path, replace=False)
            continue
        try:
            st = os.fstat(fd)
            with os.fdopen(fd, "rb") as f:
                fd = None
                secret = f.read(_KEY_BYTES + 1)
        finally:
            if fd is not None:
                os.close(fd)
        getuid = getattr(os, "getuid", None)
        if getuid is not None and st.st_uid != getuid():
            raise _KeyError(f"the key file {path} is owned by another user; delete it")
        private = getuid is None or not st.st_mode & 0o077
        if private and len(secret) == _KEY_BYTES:
            return secret
        warnings.warn(
            f"fungrad compile cache: the key file {path} "
            + ("was readable by others" if not private else "had the wrong size")
            + "; replaced it with a new key (cached entries will be rebuilt)",
            CacheWarning,
            stacklevel=6,
        )
        _write_key(path, replace=True)
    raise _KeyError(f"cannot create a usable key file {path}")


def _write_key(path: Path, replace: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_PARTIAL)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
        if replace:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails if another process made the key first: theirs is kept
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system
            os.replace(tmp, path)
            return
    finally:
        _unlink(Path(tmp))


def _tag(secret: bytes, signed: bytes) -> bytes:
    return hmac.new(secret, signed, hashlib.sha256).digest()


def _encode(key: str, data: bytes, meta: dict, secret: bytes) -> bytes:
    header = json.dumps({"key": key, "size": len(data), "meta": meta}).encode()
    signed = _HEADER.pack(_MAGIC, len(header)) + header + data
    return signed + _tag(secret, signed)


def _decode(blob: bytes, key: str, secret: bytes) -> tuple[bytes, dict] | None:
    """``(data, meta)`` if ``blob`` is a complete entry for ``key`` signed with ``secret``,
    else None. Nothing of the entry is interpreted before its tag verifies."""
    if len(blob) < _HEADER.size + _TAG_BYTES:
        return None
    signed, tag = blob[:-_TAG_BYTES], blob[-_TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(secret, signed)):
        return None
    magic, hlen = _HEADER.unpack_from(signed)
    if magic != _MAGIC or _HEADER.size + hlen > len(signed):
        return None
    try:
        header = json.loads(signed[_HEADER.size : _HEADER.size + hlen])
    except ValueError:
        return None
    data = signed[_HEADER.size + hlen :]
    if (
        not isinstance(header, dict)
        or header.get("key") != key
        or header.get("size") != len(data)
        or not isinstance(header.get("meta"), dict)
    ):
        return None
    return data, header["meta"]


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


_caches: dict[tuple[Path, int], ObjectCache] = {}
_caches_lock = threading.Lock()


def default_cache(library: bool = False) -> ObjectCache | None:
    """The cache for the current :func:`default_cache_dir`, or None when caching is disabled
    (for programs, or with ``library`` for fungrad's own libraries: :func:`cache_enabled`).

    The directory and ``FUNGRAD_CACHE_MAX_BYTES`` are read at every call, so changing the
    environment switches to another (memoised) cache object with its own counters.
    """
    if not cache_enabled(library):
        return None
    directory = default_cache_dir()
    max_bytes = _max_bytes_from_env()
    with _caches_lock:
        cache = _caches.get((directory, max_bytes))
        if cache is None:
            default_location = not os.environ.get("FUNGRAD_CACHE_DIR")
            cache = _caches[(directory, max_bytes)] = ObjectCache(
                directory, max_bytes, own_parent=default_location
            )
        return cache


_warned_sizes: set[str] = set()


def _max_bytes_from_env() -> int:
    """``FUNGRAD_CACHE_MAX_BYTES`` in bytes (see :func:`parse_size`), or the default; a value
    that is not a size warns once and the default is used (a cache problem never stops jit)."""
    raw = os.environ.get("FUNGRAD_CACHE_MAX_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(raw)
    except ValueError as e:
        if raw not in _warned_sizes:
            _warned_sizes.add(raw)
            warnings.warn(
                f"fungrad compile cache: FUNGRAD_CACHE_MAX_BYTES={e}; using the "
                f"default cap, {DEFAULT_MAX_BYTES // 2**20}M",
                CacheWarning,
                stacklevel=4,
            )
        return DEFAULT_MAX_BYTES
