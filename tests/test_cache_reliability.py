"""The on-disk object cache (fungrad/lowering/cache.py) under damage and misuse (issue 15, items
14-16): every entry is signed with a per-user HMAC key, so a damaged or foreign entry of any kind
(header, metadata, object) is detected, evicted and rebuilt, never loaded; directories are
private whatever the umask; FUNGRAD_CACHE_MAX_BYTES takes unit suffixes and a bad value warns.

All in-process, each test with its own FUNGRAD_CACHE_DIR."""

import ctypes
import hashlib
import json
import os
import stat
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.lowering.cpu import cache
from fungrad.lowering.cpu import compiler as cpu
from tests.test_lowering_cpu import affine_ir

KERNEL_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def compile_affine(scale, shift):
    return cpu.compile_module(
        affine_ir(scale, shift, name="fg_entry"), ["fg_entry"], name="affine", opt_level=0
    )


def run(module, x):
    y = np.full_like(x, np.nan)
    module.function("fg_entry", KERNEL_ARGS)(x.ctypes.data, y.ctypes.data, 0, x.size)
    return y


def key_of(scale, shift):
    h = cpu.host()
    return cache.cache_key(
        affine_ir(scale, shift, name="fg_entry"),
        triple=h.triple,
        cpu=h.cpu,
        features=h.features,
        pipeline=cpu._pipeline_options(0),
    )


X = np.linspace(-4, 4, 37, dtype=np.float32)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# -- damaged entries ------------------------------------------------------------------------------

SECRET = bytes(range(32))


@given(st.data())
def test_issue15_any_single_byte_change_or_truncation_is_detected(data):
    """_decode accepts only the exact bytes _encode wrote: any flipped byte (header, metadata,
    object or tag) and any truncation or extension is refused."""
    meta = {"name": "f", "functions": ["fg_entry"], "externals": []}
    blob = cache._encode("k" * 64, b"\x7fELF object bytes", meta, SECRET)
    assert cache._decode(blob, "k" * 64, SECRET) == (b"\x7fELF object bytes", meta)
    pos = data.draw(st.integers(0, len(blob) - 1))
    xor = data.draw(st.integers(1, 255))
    flipped = blob[:pos] + bytes([blob[pos] ^ xor]) + blob[pos + 1 :]
    assert cache._decode(flipped, "k" * 64, SECRET) is None
    cut = data.draw(st.integers(0, len(blob) - 1))
    assert cache._decode(blob[:cut], "k" * 64, SECRET) is None
    assert cache._decode(blob + b"\0", "k" * 64, SECRET) is None
    assert cache._decode(blob, "j" * 64, SECRET) is None  # an entry moved to another key
    assert cache._decode(blob, "k" * 64, bytes(32)) is None  # another user's key


def test_issue15_flipped_metadata_is_evicted_and_rebuilt(cache_dir):
    """Issue 15 item 14: the entry's metadata (which functions it defines) was not covered by the
    checksum, so `fg_entry` -> `fg_entrx` made every later compile raise CompileError forever."""
    compile_affine("3.5", "1.25")
    path = cache.default_cache().path_for(key_of("3.5", "1.25"))
    blob = path.read_bytes()
    header_end = blob.index(b"}}") + 2  # the JSON header comes first
    assert b"fg_entry" in blob[:header_end]
    path.write_bytes(blob.replace(b"fg_entry", b"fg_entrx", 1))
    store = cache.default_cache()
    mod = compile_affine("3.5", "1.25")  # no CompileError
    assert not mod.stats.cache_hit and store.corrupt == 1
    np.testing.assert_array_equal(run(mod, X), X * np.float32(3.5) + np.float32(1.25))
    assert path.read_bytes() == blob  # rebuilt as it was
    assert compile_affine("3.5", "1.25").stats.cache_hit and store.corrupt == 1


def test_issue15_foreign_object_with_recomputed_checksum_is_never_loaded(cache_dir):
    """Issue 15 item 15: an entry holding another program's object, with a correct checksum (the
    old format) or signed with another key (the new one), is refused and rebuilt: the function
    computes x*3.5+1.25, never the planted x*4+1.25."""
    store = cache.default_cache()
    compile_affine("4.0", "1.25")
    planted, meta = cache._decode(
        store.path_for(key_of("4.0", "1.25")).read_bytes(),
        key_of("4.0", "1.25"),
        store._ensure_dir(),
    )
    victim = store.path_for(key_of("3.5", "1.25"))
    header = json.dumps(
        {
            "key": key_of("3.5", "1.25"),
            "size": len(planted),
            "sha256": hashlib.sha256(planted).hexdigest(),
            "meta": meta,
        }
    ).encode()
    old_format = struct.pack("<8sI", b"FGOBJ001", len(header)) + header + planted
    other_key = cache._encode(key_of("3.5", "1.25"), planted, meta, os.urandom(32))
    for forged in (old_format, other_key):
        victim.write_bytes(forged)
        corrupt = store.corrupt
        mod = compile_affine("3.5", "1.25")
        assert store.corrupt == corrupt + 1 and not mod.stats.cache_hit
        np.testing.assert_array_equal(run(mod, X), X * np.float32(3.5) + np.float32(1.25))


def test_issue15_key_file_is_private_and_its_loss_rebuilds_entries(cache_dir):
    compile_affine("2.0", "1.0")
    key = cache_dir / cache.KEY_FILE
    assert mode(key) == 0o600 and key.stat().st_size == 32
    assert mode(cache_dir) == 0o700
    first = key.read_bytes()
    key.unlink()  # a new key: every entry signed with the old one is rebuilt, not loaded
    cache._caches.clear()
    mod = compile_affine("2.0", "1.0")
    assert not mod.stats.cache_hit and cache.default_cache().corrupt == 1
    assert key.read_bytes() != first and mode(key) == 0o600
    np.testing.assert_array_equal(run(mod, X), X * 2 + 1)


def test_issue15_readable_key_file_is_replaced(cache_dir):
    compile_affine("2.0", "1.0")
    key = cache_dir / cache.KEY_FILE
    first = key.read_bytes()
    key.chmod(0o644)
    cache._caches.clear()
    with pytest.warns(cache.CacheWarning, match="readable by others; replaced it"):
        mod = compile_affine("2.0", "1.0")
    assert not mod.stats.cache_hit and mode(key) == 0o600 and key.read_bytes() != first
    np.testing.assert_array_equal(run(mod, X), X * 2 + 1)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs chown (root)")
def test_issue15_key_file_of_another_user_disables_the_cache(cache_dir):
    compile_affine("2.0", "1.0")
    os.chown(cache_dir / cache.KEY_FILE, 12345, 12345)
    cache._caches.clear()
    with pytest.warns(cache.CacheWarning, match="owned by another user"):
        mod = compile_affine("2.0", "1.0")
    assert not mod.stats.cache_hit
    np.testing.assert_array_equal(run(mod, X), X * 2 + 1)


# -- directory modes ------------------------------------------------------------------------------


@pytest.fixture
def umask_000():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_issue15_umask_000_creates_private_dirs_key_and_entries(tmp_path, monkeypatch, umask_000):
    """Issue 15 item 16: under umask 000 the parents (~/.cache, ~/.cache/fungrad) were created
    0777. Every directory fungrad creates is 0700, the key and the entries 0600."""
    xdg = tmp_path / "home" / ".cache"
    monkeypatch.delenv("FUNGRAD_CACHE_DIR")
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    d = cache.default_cache_dir()
    assert d == xdg / "fungrad" / fg.__version__
    tmp_path.chmod(0o755)  # an existing parent: not ours to change
    compile_affine("2.0", "1.0")
    for p in (tmp_path / "home", xdg, xdg / "fungrad", d):
        assert mode(p) == 0o700, p
    assert mode(d / cache.KEY_FILE) == 0o600
    assert [mode(p) for p in d.glob("*.fgo")] == [0o600]
    assert mode(tmp_path) == 0o755
    assert compile_affine("2.0", "1.0").stats.cache_hit


def test_issue15_default_location_tightens_fungrads_own_dirs_only(tmp_path, monkeypatch):
    """An old fungrad (or umask 000) left ~/.cache/fungrad 0777 and the version dir 0755:
    both are fungrad's and become 0700; ~/.cache, not ours alone, keeps its mode."""
    xdg = tmp_path / ".cache"
    (xdg / "fungrad" / fg.__version__).mkdir(parents=True)
    xdg.chmod(0o755)
    (xdg / "fungrad").chmod(0o777)
    (xdg / "fungrad" / fg.__version__).chmod(0o755)
    monkeypatch.delenv("FUNGRAD_CACHE_DIR")
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    compile_affine("2.0", "1.0")
    assert [mode(p) for p in (xdg, xdg / "fungrad", xdg / "fungrad" / fg.__version__)] == [
        0o755,
        0o700,
        0o700,
    ]


def test_issue15_concurrent_first_use_agrees_on_one_key(tmp_path):
    """Caches opened at the same time on a fresh directory (threads here, processes alike:
    the key is hard-linked into place) all sign with the same key."""
    import threading

    d = tmp_path / "race"
    stores = [cache.ObjectCache(d) for _ in range(8)]
    keys = [None] * len(stores)
    start = threading.Barrier(len(stores))

    def first_use(i):
        start.wait()
        keys[i] = stores[i]._ensure_dir()

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and keys[0] == (d / cache.KEY_FILE).read_bytes()
    assert [p.name for p in d.iterdir()] == [cache.KEY_FILE]  # no temp file left behind


def test_issue15_existing_readable_cache_dir_is_tightened_parents_left_alone(tmp_path, monkeypatch):
    parent = tmp_path / "shared-parent"
    parent.mkdir()
    parent.chmod(0o755)
    d = parent / "cache"
    d.mkdir()
    d.chmod(0o755)
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(d))
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    compile_affine("2.0", "1.0")
    assert mode(d) == 0o700 and mode(parent) == 0o755
    assert compile_affine("2.0", "1.0").stats.cache_hit


def test_issue15_group_writable_cache_dir_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    d.mkdir()
    d.chmod(0o775)
    monkeypatch.setenv("FUNGRAD_CACHE_DIR", str(d))
    monkeypatch.delenv("FUNGRAD_DISABLE_CACHE", raising=False)
    with pytest.warns(cache.CacheWarning, match="writable by others"):
        mod = compile_affine("2.0", "1.0")
    assert list(d.iterdir()) == [] and mode(d) == 0o775
    np.testing.assert_array_equal(run(mod, X), X * 2 + 1)


# -- FUNGRAD_CACHE_MAX_BYTES ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4000", 4000),
        ("4000B", 4000),
        ("512M", 512 * 2**20),
        ("512m", 512 * 2**20),
        ("512MB", 512 * 2**20),
        ("512MiB", 512 * 2**20),
        ("1.5G", 3 * 2**29),
        (" 2 k ", 2048),
        ("1T", 2**40),
        ("0", 0),
    ],
)
def test_issue15_cache_size_accepts_unit_suffixes(text, expected):
    assert cache.parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "-5", "5X", "M", "1e9", "5 MM", "512iB", ""])
def test_issue15_cache_size_refuses_non_sizes(text):
    with pytest.raises(ValueError, match="is not a size"):
        cache.parse_size(text)


def test_issue15_cache_size_env_suffix_and_bad_value(cache_dir, monkeypatch):
    """`FUNGRAD_CACHE_MAX_BYTES=512M` made every jit call raise; now it is 512 MiB, and a value
    that is not a size warns (a CacheWarning, as other cache problems) and jit still works."""
    monkeypatch.setenv("FUNGRAD_CACHE_MAX_BYTES", "512M")
    assert cache.default_cache().max_bytes == 512 * 2**20
    monkeypatch.setenv("FUNGRAD_CACHE_MAX_BYTES", "a lot")
    with pytest.warns(cache.CacheWarning, match="FUNGRAD_CACHE_MAX_BYTES='a lot' is not a size"):
        store = cache.default_cache()
    assert store.max_bytes == cache.DEFAULT_MAX_BYTES
    out = fg.jit(lambda x: x * 3.0 + 0.5)(fnp.arange(4.0))
    np.testing.assert_array_equal(np.asarray(out), np.arange(4.0, dtype=np.float32) * 3 + 0.5)
