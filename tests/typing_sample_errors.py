"""Definite type errors that mypy must report (tests/test_typing.py): each line marked
``# E: <code>`` must get exactly one error with that code, and no other line may get one. Every
marked line also fails at run time (this file is only type-checked, never run)."""

from __future__ import annotations

import fungrad as fg
import fungrad.numpy as fnp


def f(x: fg.Array) -> fg.Array:
    return x * 2


def errors(x: fg.Array) -> None:
    x[0] = 1.0  # E: index
    x.no_such_method()  # E: attr-defined
    x + "a"  # E: operator
    x.T()  # E: operator
    fnp.sin("a")  # E: arg-type
    fnp.add(x, [1, 2])  # E: arg-type
    x.sum(axis="rows")  # E: arg-type
    x.reshape(2.5)  # E: arg-type
    x.at[0].set("a")  # E: arg-type
    x.astype(3)  # E: arg-type
    n: int = x.shape  # E: assignment
    s: str = fnp.ones(3)  # E: assignment
    fg.grad(3)  # E: arg-type
    fg.vmap(f)("a")  # E: arg-type
    fnp.zeros_like([1.0])  # E: arg-type
    del n, s
