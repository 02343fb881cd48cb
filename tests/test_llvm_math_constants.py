"""The multi-part constants written out in numeric.CONSTANTS, derived again from 90 digits.

Each constant is a sum of parts of one float type, each part the remainder left by the parts
before it, rounded to nearest. A mistyped digit in the table would cost the transcendentals
their accuracy without failing loudly, so every part is checked exactly here.
"""

from decimal import Decimal, localcontext

import pytest

from fungrad.lowering.math import numeric as lm

PI = Decimal(
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620"
    "89986280348253421170679"
)


def _exact(fn):
    with localcontext() as ctx:
        ctx.prec = 90
        return +fn()


LN2 = _exact(lambda: Decimal(2).ln())
LN10 = _exact(lambda: Decimal(10).ln())
VALUES = {
    "ln2": LN2,
    "log2e": _exact(lambda: 1 / LN2),
    "log10_2": _exact(lambda: LN2 / LN10),
    "log10e": _exact(lambda: 1 / LN10),
    "pio2_4": _exact(lambda: PI / 2),
    "pi": PI,
    "pio2": _exact(lambda: PI / 2),
    "pio4": _exact(lambda: PI / 4),
    "3pio4": _exact(lambda: 3 * PI / 4),
    "2/pi": _exact(lambda: 2 / PI),
    "2/3": _exact(lambda: Decimal(2) / 3),
    "2/5": _exact(lambda: Decimal(2) / 5),
}


def _split(value: Decimal, ft, parts: int) -> tuple[float, ...]:
    out = []
    with localcontext() as ctx:
        ctx.prec = 90
        for _ in range(parts):
            c = ft.round(float(value))
            out.append(c)
            value = value - Decimal(c)
    return tuple(out)


@pytest.mark.parametrize("ft", [lm.F32, lm.F64], ids=["f32", "f64"])
def test_constants_are_the_rounded_remainders(ft):
    table = lm.CONSTANTS[ft]
    assert set(table) == set(VALUES)
    for name, value in VALUES.items():
        parts = table[name]
        assert parts == _split(value, ft, len(parts)), name
        # and the parts carry the value to about 2x (4x) the type's precision
        with localcontext() as ctx:
            ctx.prec = 90
            rest = abs(value - sum(Decimal(p) for p in parts))
        assert rest <= abs(value) * Decimal(2) ** (-(ft.mant + 1) * len(parts) + 1), name
