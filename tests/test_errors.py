"""fungrad.errors: each misuse of a traced value raises the class JAX 0.10.2 raises for it
(recorded from JAX), in JAX's hierarchy, so ``except jax.errors.X`` clauses behave the same."""

from __future__ import annotations

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad import errors

# (what the program does with a traced int32 scalar x, the class JAX raises)
_CASES = [
    ("if", lambda x: 1 if x > 0 else 2, errors.TracerBoolConversionError),
    ("bool", lambda x: bool(x), errors.TracerBoolConversionError),
    ("int", lambda x: int(x), errors.ConcretizationTypeError),
    ("float", lambda x: float(x), errors.ConcretizationTypeError),
    ("list index", lambda x: [1, 2][x], errors.TracerIntegerConversionError),
    ("range", lambda x: range(x), errors.TracerIntegerConversionError),
    ("np.asarray", lambda x: np.asarray(x), errors.TracerArrayConversionError),
    (
        "boolean mask",
        lambda x: fnp.arange(3)[fnp.arange(3) > x],
        errors.NonConcreteBooleanIndexError,
    ),
    ("nonzero", lambda x: fnp.nonzero(fnp.arange(3) > x), errors.ConcretizationTypeError),
]


@pytest.mark.parametrize("what,f,error", _CASES, ids=[c[0] for c in _CASES])
def test_each_misuse_raises_jax_s_class(what, f, error):
    with pytest.raises(error) as info:
        fg.jit(f)(np.int32(1))
    assert type(info.value) is error


def test_the_hierarchy_is_jax_s():
    assert issubclass(errors.TracerBoolConversionError, errors.ConcretizationTypeError)
    assert not issubclass(errors.TracerIntegerConversionError, errors.ConcretizationTypeError)
    for cls in (
        errors.ConcretizationTypeError,
        errors.TracerIntegerConversionError,
        errors.TracerArrayConversionError,
        errors.UnexpectedTracerError,
    ):
        assert issubclass(cls, errors.JAXTypeError) and issubclass(cls, TypeError)
    assert issubclass(errors.NonConcreteBooleanIndexError, errors.JAXIndexError)
    assert issubclass(errors.NonConcreteBooleanIndexError, IndexError)
    assert errors.ConcretizationTypeError is fg.ConcretizationTypeError


def test_messages_say_how_to_fix():
    with pytest.raises(errors.TracerBoolConversionError, match="lax.cond"):
        fg.jit(lambda x: 1 if x > 0 else 2)(np.int32(1))
