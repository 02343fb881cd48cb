"""The few array operations the transforms apply themselves.

Instantiating a symbolic zero (``full``), adding two tangents (``add``), moving a batch
dimension (``transpose``), broadcasting an unbatched value along one (``broadcast_in_dim``),
summing one away (``reduce_sum``) and giving a cotangent its primal's weak type
(``convert_element_type``) are lax's wrappers; the identity that ``jacfwd``/``jacrev``
take their basis from (``eye``) is fungrad.numpy's. The transforms sit below ``fungrad.lax``,
which imports them to attach its rules, so they cannot import it: lax and fungrad.numpy hand
their functions over with :func:`register` when they are imported (their ``__init__.py``),
and the transforms call them as ``array_ops.add(x, y)``.
"""

from __future__ import annotations

__all__ = [
    "add",
    "broadcast_in_dim",
    "convert_element_type",
    "eye",
    "full",
    "reduce_sum",
    "register",
    "transpose",
]


def _not_registered(*args, **kwargs):
    raise RuntimeError(
        "fungrad.transforms.array_ops: fungrad.lax and fungrad.numpy have not "
        "registered their operations; import fungrad (which imports them) first"
    )


full = add = transpose = broadcast_in_dim = reduce_sum = eye = _not_registered
convert_element_type = _not_registered

_NAMES = frozenset(
    {"full", "add", "transpose", "broadcast_in_dim", "reduce_sum", "eye", "convert_element_type"}
)


def register(**ops) -> None:
    """Install the given operations (called once each, by fungrad.lax and fungrad.numpy)."""
    unknown = set(ops) - _NAMES
    if unknown:
        raise TypeError(
            f"array_ops.register: unknown operations {sorted(unknown)}; known: {sorted(_NAMES)}"
        )
    globals().update(ops)
