"""``jax.experimental.layout``: the memory layout of an array (:class:`Layout`), a layout with a
sharding (:class:`Format`), and :func:`with_layout_constraint`.

fungrad keeps every array in one layout, row-major (C order: in JAX's terms ``major_to_minor =
(0, 1, ..., ndim - 1)``, the CPU default). A layout is where elements sit in memory, never what
they are, so a program that asks for another one gets the same values: the classes are JAX's
value types (equal and hashable by their fields, validated as JAX validates them) and
:func:`with_layout_constraint` checks the requested layout against the value and returns the
value unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Format", "Layout", "with_layout_constraint"]


class _AutoLayout:
    """``Layout.AUTO``: let the compiler choose (fungrad's choice is always row-major)."""

    def __repr__(self):
        return "AUTO"


@dataclass(frozen=True)
class Layout:
    """Which dimension is most major in memory, first to last (``(0, 1)``: row-major), the
    tiling, and the element size in bits for sub-byte types (0 otherwise)."""

    major_to_minor: tuple[int, ...]
    tiling: tuple[tuple[int, ...], ...] | None = None
    sub_byte_element_size_in_bits: int = 0

    AUTO = _AutoLayout()

    def __post_init__(self):
        object.__setattr__(self, "major_to_minor", tuple(int(d) for d in self.major_to_minor))
        if self.tiling is not None:
            object.__setattr__(self, "tiling", tuple(tuple(t) for t in self.tiling))

    def check_compatible_aval(self, shape) -> None:
        """A ValueError unless ``major_to_minor`` is a permutation of ``shape``'s axes."""
        if len(self.major_to_minor) != len(shape):
            raise ValueError(
                "Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={self.major_to_minor} and shape={tuple(shape)}"
            )
        if sorted(self.major_to_minor) != list(range(len(shape))):
            raise ValueError(
                f"major_to_minor={self.major_to_minor} must be a permutation of the axes "
                f"0..{len(shape) - 1} of a value of shape {tuple(shape)}"
            )


class Format:
    """A :class:`Layout` (or ``Layout.AUTO``, or None: the default) with a sharding. A
    concrete layout needs a concrete sharding (JAX's rule)."""

    __slots__ = ("layout", "sharding")

    def __init__(self, layout=None, sharding=None):
        if isinstance(layout, Layout) and sharding is None:
            raise ValueError(
                f"Sharding has to be concrete when layout is of type {Layout}. Please pass a "
                "`fungrad.sharding.NamedSharding` or `fungrad.sharding.SingleDeviceSharding` "
                "to the sharding argument. Got sharding None"
            )
        if not (layout is None or layout is Layout.AUTO or isinstance(layout, Layout)):
            raise TypeError(f"Format: layout must be a Layout, Layout.AUTO or None, got {layout!r}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self):
        return f"Format(layout={self.layout!r}, sharding={self.sharding!r})"

    def __eq__(self, other):
        return (
            isinstance(other, Format)
            and self.layout == other.layout
            and self.sharding == other.sharding
        )

    def __hash__(self):
        return hash((self.layout, self.sharding))


def with_layout_constraint(x, layout: Layout):
    """``x``, which must be laid out as ``layout``: checked against ``x``'s rank (JAX's
    ValueError) and returned unchanged, since fungrad's arrays are all row-major and a layout
    changes no value (see the module docstring)."""
    from fungrad import tree_util
    from fungrad.core import get_aval

    def check(leaf):
        if isinstance(layout, Layout):
            try:
                layout.check_compatible_aval(get_aval(leaf).shape)
            except ValueError as e:
                raise ValueError(
                    "One of with_layout_constraint arguments is incompatible with its layout "
                    f"annotation {layout}: {e}"
                ) from None
        return leaf

    return tree_util.tree_map(check, x)
