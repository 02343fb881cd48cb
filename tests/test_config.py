"""Configuration with JAX's spellings: ``jax_*`` option aliases, attribute reads, environment
variables (``FUNGRAD_*`` and JAX's ``JAX_*``), the top-level ``State`` context managers, and
``disable_jit``."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.config import config

# the module (``fungrad.config`` the attribute is the Config object, as jax.config is)
config_module = importlib.import_module("fungrad.config")


@pytest.fixture
def restore_config():
    saved = {k: getattr(config, k) for k in config_module._OPTIONS}
    yield
    for k, v in saved.items():
        setattr(config, k, v)


def test_jax_names_are_aliases_for_update_read_and_attributes(restore_config):
    config.update("jax_enable_x64", True)
    assert config.enable_x64 is True
    assert config.jax_enable_x64 is True
    assert config.read("jax_enable_x64") is True
    assert fnp.ones(1).dtype == np.float64
    config.update("jax_enable_x64", False)
    assert fnp.ones(1).dtype == np.float32
    config.update("jax_enable_checks", False)
    assert config.check_impl_avals is False
    assert config.values["jax_enable_checks"] is False


def test_unknown_options_and_bad_values_are_errors(restore_config):
    with pytest.raises(ValueError, match="unknown option 'jax_no_such_option'"):
        config.update("jax_no_such_option", True)
    with pytest.raises(ValueError, match="unknown option"):
        config.read("nope")
    with pytest.raises(AttributeError, match="no option 'jax_nope'"):
        config.jax_nope  # noqa: B018
    with pytest.raises(TypeError, match="takes a bool"):
        config.update("jax_enable_x64", "yes")
    with pytest.raises(ValueError, match="default_matmul_precision must be one of"):
        config.update("jax_default_matmul_precision", "fastestest")
    with pytest.raises(ValueError, match="only 'cpu' is accepted"):
        config.update("jax_platforms", "cuda")


def test_matmul_precision_and_platforms_accept_jax_values(restore_config):
    for value in ("highest", "float32", "bfloat16", "tensorfloat32", "default", None):
        config.update("jax_default_matmul_precision", value)
        assert config.jax_default_matmul_precision == value
    config.update("jax_platforms", "cpu")
    config.update("jax_platform_name", "cpu")
    assert config.platforms == "cpu"
    with fg.default_matmul_precision("highest"):
        assert fg.default_matmul_precision.value == "highest"
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(fnp.asarray(a) @ a.T, a @ a.T)
    assert fg.default_matmul_precision.value is None


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, False),
        ({"JAX_ENABLE_X64": "1"}, True),
        ({"JAX_ENABLE_X64": "true"}, True),
        ({"JAX_ENABLE_X64": "0"}, False),
        ({"FUNGRAD_ENABLE_X64": "1"}, True),
        ({"FUNGRAD_ENABLE_X64": "0", "JAX_ENABLE_X64": "1"}, False),  # fungrad's name wins
    ],
)
def test_environment_variables(monkeypatch, env, expected):
    for name in ("JAX_ENABLE_X64", "FUNGRAD_ENABLE_X64"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert config_module._from_env("enable_x64", False) is expected


def test_environment_variable_values_are_checked(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    with pytest.raises(ValueError, match="platforms='tpu'"):
        config_module._from_env("platforms", None)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert config_module._from_env("platforms", None) == "cpu"
    monkeypatch.setenv("JAX_DEFAULT_MATMUL_PRECISION", "highest")
    assert config_module._from_env("default_matmul_precision", None) == "highest"


def test_enable_x64_state_is_a_context_manager(restore_config):
    assert fg.enable_x64.value is False
    with fg.enable_x64(True):
        assert fg.enable_x64.value is True
        assert fnp.arange(3.0).dtype == np.float64
        with fg.enable_x64(False):
            assert fnp.arange(3.0).dtype == np.float32
        assert config.enable_x64 is True
    assert config.enable_x64 is False
    with fg.enable_x64():  # JAX's default for the context manager: on
        assert config.enable_x64 is True
    assert config.enable_x64 is False
    assert fg.enable_x64.name == "jax_enable_x64"
    with pytest.raises(TypeError, match="ambiguous"):
        bool(fg.enable_x64)


def test_state_restores_after_an_exception(restore_config):
    with pytest.raises(RuntimeError), fg.enable_checks(False):
        assert config.check_impl_avals is False
        raise RuntimeError
    assert config.check_impl_avals is True  # the test suite's setting


def test_disable_jit_runs_the_python_function_eagerly(restore_config):
    seen = []

    @fg.jit
    def f(x):
        seen.append(type(x))
        return x * 2 + 1

    x = fnp.arange(3.0)
    np.testing.assert_array_equal(f(x), [1, 3, 5])
    np.testing.assert_array_equal(f(x), [1, 3, 5])  # the hot path, no new trace
    assert len(seen) == 1 and seen[0] is not fg.Array
    with fg.disable_jit():
        assert config.disable_jit is True
        np.testing.assert_array_equal(f(x), [1, 3, 5])
        assert seen[-1] is fg.Array
        # a concrete value inside the function: Python control flow on it works
        g = fg.jit(lambda v: v * 2 if float(v.sum()) > 0 else -v)
        np.testing.assert_array_equal(g(x), 2 * np.arange(3.0))
    assert config.disable_jit is False
    n = len(seen)
    f(x)
    assert len(seen) == n  # compiled again after the block
    config.update("jax_disable_jit", True)
    f(x)
    assert seen[-1] is fg.Array and len(seen) == n + 1


def test_disable_jit_with_static_arguments_and_under_grad(restore_config):
    @fg.jit
    def h(x, n):
        return x**n

    h2 = fg.jit(h, static_argnums=1)
    with fg.disable_jit():
        assert float(h2(3.0, 2)) == 9.0
        assert float(fg.grad(lambda x: h(x, 3.0))(2.0)) == pytest.approx(12.0)
    with fg.disable_jit(False):
        assert config.disable_jit is False
