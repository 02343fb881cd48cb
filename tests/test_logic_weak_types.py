"""Weak types of jnp's logical functions, case by case against JAX 0.10.2's (recorded from JAX:
which operand combinations give a weakly typed bool). The operands: strong bool and int8 arrays,
a strong 0-d int32, a float32 array, Python int/float/bool, a numpy int8 scalar."""

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp

VALUES = {
    "barr": lambda: fnp.array([True, False]),
    "i8arr": lambda: fnp.array([1, 0], fnp.int8),
    "i32s": lambda: fnp.int32(1),
    "f32arr": lambda: fnp.array([1.0, 0.0]),
    "pyint": lambda: 1,
    "pyfloat": lambda: 2.0,
    "pybool": lambda: True,
    "npi8": lambda: np.int8(3),
}

# JAX 0.10.2: the calls whose result is weakly typed (every other one is a strong bool)
JAX_WEAK = {
    "logical_and(i32s,pyfloat)",
    "logical_and(npi8,pyfloat)",
    "logical_and(pybool,pyfloat)",
    "logical_and(pybool,pyint)",
    "logical_and(pyfloat,i32s)",
    "logical_and(pyfloat,npi8)",
    "logical_and(pyfloat,pybool)",
    "logical_and(pyfloat,pyfloat)",
    "logical_and(pyfloat,pyint)",
    "logical_and(pyint,pybool)",
    "logical_and(pyint,pyfloat)",
    "logical_and(pyint,pyint)",
    "logical_not(pyfloat)",
    "logical_not(pyint)",
    "logical_or(i32s,pyfloat)",
    "logical_or(npi8,pyfloat)",
    "logical_or(pybool,pyfloat)",
    "logical_or(pybool,pyint)",
    "logical_or(pyfloat,i32s)",
    "logical_or(pyfloat,npi8)",
    "logical_or(pyfloat,pybool)",
    "logical_or(pyfloat,pyfloat)",
    "logical_or(pyfloat,pyint)",
    "logical_or(pyint,pybool)",
    "logical_or(pyint,pyfloat)",
    "logical_or(pyint,pyint)",
    "logical_xor(i32s,pyfloat)",
    "logical_xor(npi8,pyfloat)",
    "logical_xor(pybool,pyfloat)",
    "logical_xor(pybool,pyint)",
    "logical_xor(pyfloat,i32s)",
    "logical_xor(pyfloat,npi8)",
    "logical_xor(pyfloat,pybool)",
    "logical_xor(pyfloat,pyfloat)",
    "logical_xor(pyfloat,pyint)",
    "logical_xor(pyint,pybool)",
    "logical_xor(pyint,pyfloat)",
    "logical_xor(pyint,pyint)",
}

CASES = [f"{op}({a},{b})" for op in ("logical_and", "logical_or", "logical_xor") for a in VALUES
         for b in VALUES] + [f"logical_not({a})" for a in VALUES]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_logical_weak_types_follow_jax(case):
    op, args = case.split("(")
    names = args.rstrip(")").split(",")
    out = getattr(fnp, op)(*(VALUES[n]() for n in names))
    aval = fg.typeof(out)
    assert aval.dtype == np.bool_
    assert aval.weak_type == (case in JAX_WEAK), (case, aval)
