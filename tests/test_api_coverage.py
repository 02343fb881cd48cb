"""fungrad's coverage of JAX 0.10.2's public API only grows.

tests/jax_api/<module>.txt list JAX's public names (tools/jax_api_names.py writes them from
jax; these tests never need jax). covered.txt is the baseline of names fungrad provides; a name
in it that fungrad no longer has fails here. ``pytest -s`` prints the coverage table;
tools/api_coverage.py prints it with the missing names.
"""

from pathlib import Path

import pytest

from fungrad.compat.coverage import format_table, load_jax_names, measure

HERE = Path(__file__).resolve().parent / "jax_api"
JAX_NAMES = load_jax_names(HERE)


def _covered_baseline() -> list[tuple[str, str]]:
    out = []
    for line in (HERE / "covered.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            module, name = line.split()
            out.append((module, name))
    return out


@pytest.fixture(scope="module")
def coverage():
    return measure(JAX_NAMES)


def test_name_lists_are_well_formed():
    expected = {
        "jax",
        "jax.numpy",
        "jax.numpy.linalg",
        "jax.numpy.fft",
        "jax.lax",
        "jax.nn",
        "jax.nn.initializers",
        "jax.random",
        "jax.scipy.special",
        "jax.scipy.stats",
        "jax.scipy.linalg",
        "jax.scipy.signal",
        "jax.scipy.ndimage",
        "jax.scipy.integrate",
        "jax.scipy.fft",
        "jax.image",
        "jax.errors",
        "jax.tree_util",
        "jax.tree",
        "jax.flatten_util",
        "jax.debug",
        "jax.ad_checkpoint",
        "jax.test_util",
        "jax.dtypes",
        "jax.sharding",
        "jax.experimental.checkify",
        "jax.example_libraries.optimizers",
        "jax.example_libraries.stax",
    }
    assert set(JAX_NAMES) == expected
    for module, names in JAX_NAMES.items():
        assert names, module
        assert names == sorted(set(names)), f"{module}: not sorted or has duplicates"
        assert all(n.isidentifier() and not n.startswith("_") for n in names), module
    # Spot checks that the lists are JAX's public API and not something else.
    assert {"grad", "jit", "vmap", "Array"} <= set(JAX_NAMES["jax"])
    assert {"sum", "einsum", "where", "float32"} <= set(JAX_NAMES["jax.numpy"])
    assert {"norm", "beta"} <= set(JAX_NAMES["jax.scipy.stats"])
    assert "numpy" not in JAX_NAMES["jax"]  # modules have lists of their own


def test_covered_baseline_is_still_provided(coverage):
    baseline = _covered_baseline()
    assert baseline, "covered.txt is empty"
    have = {(m, n) for m, c in coverage.items() for n in c.covered}
    lost = [f"{m}.{n}" for m, n in baseline if (m, n) not in have]
    assert not lost, (
        f"{len(lost)} JAX names fungrad provided are gone: {lost} (restore them; if removing "
        "one is intended, regenerate tests/jax_api/covered.txt with "
        "`tools/jax_api_names.py --update-covered`)"
    )


def test_covered_baseline_names_are_jax_names():
    stale = [f"{m}.{n}" for m, n in _covered_baseline() if n not in JAX_NAMES.get(m, ())]
    assert not stale, f"covered.txt lists names that are not in the JAX lists: {stale}"


def test_coverage_counts_a_name_exactly_when_compat_finds_it(coverage):
    import fungrad
    import fungrad.numpy as fnp

    numpy_cov = coverage["jax.numpy"]
    assert "sum" in numpy_cov.covered and hasattr(fnp, "sum")
    assert all(not hasattr(fnp, n) for n in numpy_cov.missing)
    assert set(coverage["jax.test_util"].covered) == {"check_grads", "check_jvp", "check_vjp"}
    assert "grad" in coverage["jax"].covered and hasattr(fungrad, "grad")
    assert 0.0 <= numpy_cov.percent <= 100.0


def test_print_coverage_table(coverage):
    table = format_table(coverage)
    print("\n" + table)
    assert table.splitlines()[1].startswith("jax ")
    assert len(table.splitlines()) == len(coverage) + 2
