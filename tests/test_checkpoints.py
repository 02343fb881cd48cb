"""fungrad.checkpoints: round trips of arbitrary pytrees (every dtype, 0-d, size-0, NaN/inf),
restore against ``like`` (registered classes rebuilt, mismatches named), atomic writes, bad
files, and a model + Adam state saved mid-training and resumed."""

import dataclasses
import os
import tempfile
import zipfile
from collections import OrderedDict, namedtuple

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import checkpoints, dtypes, optim, tree_util

Pair = namedtuple("Pair", ["first", "second"])


@tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    name: str = dataclasses.field(default="dense", metadata={"static": True})


def _leaf(value: np.ndarray, kind: str):
    if kind == "array" and dtypes.canonicalize_dtype(value.dtype) == value.dtype:
        return fnp.asarray(value)
    if kind == "numpy_scalar" and value.ndim == 0:
        return value[()]
    if kind == "scalar" and value.ndim == 0 and value.dtype.kind in "bifc":
        return {"b": bool, "i": int, "f": float, "c": complex}[value.dtype.kind](value[()])
    return value


_SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)


def _arrays(dtype):
    if dtypes.is_ml_float(dtype):  # hypothesis has no bfloat16/float8: any bit pattern
        bits = np.dtype(f"uint{8 * np.dtype(dtype).itemsize}")
        return hnp.arrays(bits, _SHAPES).map(lambda a: a.view(dtype))
    return hnp.arrays(dtype, _SHAPES)


LEAVES = st.builds(
    _leaf,
    st.sampled_from(dtypes.SUPPORTED).flatmap(_arrays),
    st.sampled_from(["array", "numpy", "numpy_scalar", "scalar"]),
)

KEYS = st.one_of(st.text("abcxyz_", min_size=1, max_size=3), st.integers(-5, 5))

TREES = st.recursive(
    st.one_of(LEAVES, st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        # keys all str or all int (pytree dicts sort their keys)
        st.dictionaries(st.text("abcxyz_", min_size=1, max_size=3), children, max_size=3),
        st.dictionaries(st.integers(-5, 5), children, max_size=3),
        st.lists(st.tuples(KEYS, children), max_size=3).map(OrderedDict),
        st.builds(Pair, children, children),
    ),
    max_leaves=8,
)


def _same_leaf(a, b) -> bool:
    if type(a) is not type(b) and not (isinstance(a, fg.Array) and isinstance(b, fg.Array)):
        return False
    if isinstance(a, (bool, int, float, complex)):
        return np.asarray(a).tobytes() == np.asarray(b).tobytes()
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _assert_same_tree(got, want):
    g_leaves, g_def = tree_util.tree_flatten(got)
    w_leaves, w_def = tree_util.tree_flatten(want)
    assert repr(g_def) == repr(w_def)
    assert len(g_leaves) == len(w_leaves)
    for a, b in zip(g_leaves, w_leaves):
        assert _same_leaf(a, b), (a, b)


@given(tree=TREES)
def test_round_trip_any_pytree(tree):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tree.ckpt")
        checkpoints.save(path, tree)
        _assert_same_tree(checkpoints.restore(path), tree)
        restored = checkpoints.restore(path, like=tree)
        assert tree_util.tree_structure(restored) == tree_util.tree_structure(tree)
        _assert_same_tree(restored, tree)
        assert os.listdir(tmp) == ["tree.ckpt"]  # no temporary file left behind


def test_leaf_kinds_and_weak_types_are_kept(tmp_path):
    tree = {
        "array": fnp.arange(3.0),
        "weak": fnp.asarray(2.0) * 1.5,
        "numpy": np.arange(4, dtype=np.int16).reshape(2, 2),
        "np_scalar": np.float32(1.5),
        "py": [True, 3, 2.5, 1 - 2j],
        "complex": fnp.asarray(np.array([1 + 2j, np.nan - 1j], np.complex64)),
        "empty": np.zeros((0, 3), np.uint8),
        "float0": np.zeros((2,), dtypes.float0),
    }
    checkpoints.save(tmp_path / "c", tree)
    got = checkpoints.restore(tmp_path / "c")
    assert type(got["array"]) is fg.Array and not got["array"].weak_type
    assert got["weak"].weak_type
    assert type(got["numpy"]) is np.ndarray and got["numpy"].dtype == np.int16
    assert type(got["np_scalar"]) is np.float32
    assert [type(x) for x in got["py"]] == [bool, int, float, complex]
    assert got["float0"].dtype == dtypes.float0 and got["float0"].shape == (2,)
    _assert_same_tree(got, tree)
    # the file is a plain .npz that numpy reads without pickle
    with np.load(tmp_path / "c", allow_pickle=False) as z:
        assert len(z.files) == len(tree_util.tree_leaves(tree)) + 1


def test_like_rebuilds_registered_classes_and_namedtuples(tmp_path):
    tree = {"layer": Layer(fnp.ones((2, 3)), fnp.zeros(3), name="enc"), "p": Pair(1.0, None)}
    checkpoints.save(tmp_path / "m", tree)
    with pytest.raises(
        ValueError, match=r"holds a .*Layer \(a registered pytree node\) at tree\['layer'\]"
    ):
        checkpoints.restore(tmp_path / "m")
    like = {
        "layer": Layer(fg.ShapeDtypeStruct((2, 3), np.float32), fnp.zeros(3), name="enc"),
        "p": Pair(0.0, None),
    }
    got = checkpoints.restore(tmp_path / "m", like=like)
    assert type(got["layer"]) is Layer and got["layer"].name == "enc"
    assert type(got["p"]) is Pair
    np.testing.assert_array_equal(np.asarray(got["layer"].w), np.ones((2, 3)))


@pytest.mark.parametrize(
    "like, message",
    [
        ({"a": np.zeros((2, 3), np.float32), "b": [np.zeros(2, np.int32)]}, None),
        (
            {"a": np.zeros((3, 2), np.float32), "b": [np.zeros(2, np.int32)]},
            r"at tree\['a'\]: the file has shape \(2, 3\) and dtype float32, `like` has shape "
            r"\(3, 2\) and dtype float32",
        ),
        (
            {"a": np.zeros((2, 3), np.float32), "b": [np.zeros(2, np.float32)]},
            r"at tree\['b'\]\[0\]: the file has shape \(2,\) and dtype int32, `like` has .*float32",
        ),
        (
            {"a": np.zeros((2, 3), np.float32), "c": [np.zeros(2, np.int32)]},
            r"at the root of the tree: the file has a dict with keys \['a', 'b'\], `like` has a "
            r"dict with keys \['a', 'c'\]",
        ),
        (
            {"a": np.zeros((2, 3), np.float32), "b": (np.zeros(2, np.int32),)},
            r"at tree\['b'\]: the file has a list of length 1, `like` has a tuple of length 1",
        ),
        (
            {"a": np.zeros((2, 3), np.float32), "b": [np.zeros(2, np.int32), None]},
            r"at tree\['b'\]: the file has a list of length 1, `like` has a list of length 2",
        ),
        (
            {"a": np.zeros((2, 3), np.float32), "b": ["x"]},
            r"the leaf of `like` at tree\['b'\]\[0\] is a str",
        ),
    ],
)
def test_restore_refuses_a_file_that_does_not_match_like(tmp_path, like, message):
    path = tmp_path / "ck"
    checkpoints.save(path, {"a": np.ones((2, 3), np.float32), "b": [np.arange(2, dtype=np.int32)]})
    if message is None:
        got = checkpoints.restore(path, like=like)
        np.testing.assert_array_equal(got["b"][0], [0, 1])
        return
    with pytest.raises((ValueError, TypeError), match=message):
        checkpoints.restore(path, like=like)


def test_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "state.ckpt"
    checkpoints.save(path, {"step": np.int32(1)})

    def broken_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        checkpoints.save(path, {"step": np.int32(2)})
    monkeypatch.undo()
    assert checkpoints.restore(path) == {"step": np.int32(1)}
    assert sorted(os.listdir(tmp_path)) == ["state.ckpt"]
    # a leaf that cannot be stored fails before anything is written
    with pytest.raises(TypeError, match=r"checkpoints.save: the leaf at tree\['s'\] is a str"):
        checkpoints.save(path, {"step": np.int32(3), "s": "text"})
    with pytest.raises(
        TypeError, match=r"the Python int at tree\[.big.\] .* does not fit in int64"
    ):
        checkpoints.save(path, {"big": 2**70})
    with pytest.raises(TypeError, match="dtype object"):
        checkpoints.save(path, {"o": np.array([None, 1], dtype=object)})
    assert checkpoints.restore(path) == {"step": np.int32(1)}
    assert sorted(os.listdir(tmp_path)) == ["state.ckpt"]


def test_save_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoints.save: the directory"):
        checkpoints.save(tmp_path / "missing" / "x.ckpt", {"a": np.zeros(2)})
    with pytest.raises(TypeError, match=r"the dict at tree\['d'\] has the key \(1, 2\)"):
        checkpoints.save(tmp_path / "x", {"d": {(1, 2): np.zeros(2)}})

    @fg.jit
    def inside(x):
        checkpoints.save(tmp_path / "x", {"x": x})
        return x

    with pytest.raises(TypeError, match=r"tree\['x'\] is a traced value"):
        inside(fnp.ones(2))


def test_restore_rejects_files_it_did_not_write(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoints.restore: no file"):
        checkpoints.restore(tmp_path / "nothing")
    (tmp_path / "text").write_text("hello")
    with pytest.raises(ValueError, match="is not a checkpoint written by fungrad"):
        checkpoints.restore(tmp_path / "text")
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(ValueError, match="single .npy array"):
        checkpoints.restore(tmp_path / "one.npy")
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="without fungrad's structure record"):
        checkpoints.restore(tmp_path / "plain.npz")
    with zipfile.ZipFile(tmp_path / "broken.npz", "w") as z:
        z.writestr("leaf_0.npy", b"not an array")
    with pytest.raises(ValueError, match="not a checkpoint|without fungrad's structure"):
        checkpoints.restore(tmp_path / "broken.npz")


def test_float64_saved_under_x64_restores_as_float32_with_a_warning(tmp_path):
    with fg.enable_x64():
        checkpoints.save(tmp_path / "d", {"x": fnp.asarray(np.float64(0.1))})
    with pytest.warns(
        UserWarning, match=r"saved as float64; without x64 it is restored as float32"
    ):
        got = checkpoints.restore(tmp_path / "d")
    assert got["x"].dtype == np.float32
    with fg.enable_x64():
        got = checkpoints.restore(tmp_path / "d")
        assert got["x"].dtype == np.float64 and float(got["x"]) == 0.1


def test_model_and_adam_state_resume_training_exactly(tmp_path):
    rng = np.random.default_rng(0)
    x = fnp.asarray(rng.normal(size=(8, 3)).astype(np.float32))
    y = fnp.asarray(rng.normal(size=(8,)).astype(np.float32))
    params = {"w": fnp.asarray(rng.normal(size=(3,)).astype(np.float32)), "b": fnp.zeros(())}
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(0.05))

    def loss(p):
        return fnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @fg.jit
    def step(p, s):
        u, s = opt.update(fg.grad(loss)(p), s, p)
        return optim.apply_updates(p, u), s

    p, s = params, opt.init(params)
    for _ in range(3):
        p, s = step(p, s)
    checkpoints.save(tmp_path / "run.ckpt", {"params": p, "opt_state": s, "step": 3})
    p_ref, s_ref = p, s
    for _ in range(3):
        p_ref, s_ref = step(p_ref, s_ref)

    like = {"params": params, "opt_state": opt.init(params), "step": 0}
    restored = checkpoints.restore(tmp_path / "run.ckpt", like=like)
    assert restored["step"] == 3
    assert tree_util.tree_structure(restored["opt_state"]) == tree_util.tree_structure(s)
    p2, s2 = restored["params"], restored["opt_state"]
    for _ in range(3):
        p2, s2 = step(p2, s2)
    _assert_same_tree((p2, s2), (p_ref, s_ref))
