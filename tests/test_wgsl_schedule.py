"""``wgsl.schedule``: the order a kernel's ``let`` statements are written in (no GPU needed).

The renderer writes math functions out in the kernel and orders each run of ``let``
statements by dependency level, so that llvmpipe overlaps independent chains. Reordering
must never put a statement before one it uses, nor move anything across a line that is not
a ``let`` (a store, a loop, a brace)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from fungrad.lowering.gpu import schedule as wgsl
from fungrad.lowering.math import wgsl as wgsl_math


@st.composite
def programs(draw):
    """Lines of ``let`` statements using earlier ones (or outside names), with other lines
    (stores and braces) between them."""
    lines, names = [], []
    for i in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 5)) == 0:
            lines.append(
                draw(
                    st.sampled_from(
                        [
                            "  b1[v0] = t1;",
                            "  for (var j = 0; j < 4; j++) {",
                            "  }",
                            "  if (flat >= 10i) { return; }",
                        ]
                    )
                )
            )
            continue
        uses = draw(
            st.lists(
                st.sampled_from(names + ["x", "1.0f"]) if names else st.sampled_from(["x", "1.0f"]),
                max_size=3,
            )
        )
        name = f"m{i}_v{i}"
        lines.append(f"  let {name} = f({', '.join(uses)});")
        names.append(name)
    return lines


def _defined(line):
    m = re.match(r"\s*let (\w+) = ", line)
    return m and m.group(1)


@settings(max_examples=200, deadline=None)
@given(programs())
def test_schedule_keeps_dependencies_and_other_lines_in_place(lines):
    out = wgsl.schedule(lines)
    assert sorted(out) == sorted(lines)
    for i, line in enumerate(lines):  # every other line keeps its position
        if not _defined(line):
            assert out[i] == line
    seen = set()
    for line in out:
        name = _defined(line)
        if name:
            used = set(re.findall(r"m\d+_v\d+", line.split("=", 1)[1]))
            assert used <= seen, f"{line!r} before {used - seen}"
            seen.add(name)


def test_schedule_interleaves_independent_chains_by_level():
    chain = [f"  let a{i} = a{i - 1} * 2.0f;" for i in range(1, 4)]
    other = [f"  let b{i} = b{i - 1} + 1.0f;" for i in range(1, 4)]
    out = wgsl.schedule(["  let a0 = x;", *chain, "  let b0 = y;", *other])
    assert [line.split()[1] for line in out] == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"]


def test_inlined_math_is_the_function_body_renamed():
    """``wgsl_math.inline`` gives ``function``'s statements with the parameters replaced by
    the arguments and the values prefixed (so two calls in one kernel cannot collide)."""
    lines, result, defs = wgsl_math.inline("sin", ["t7"], "m3")
    _, texts = wgsl_math.function("sin")
    text = dict(texts)["fg_sin_f32"]
    body = [line for line in text.splitlines() if line.strip().startswith("let ")]
    assert len(lines) == len(body)
    for got, want in zip(lines, body):
        assert got == re.sub(r"\bv(\d+)\b", r"m3_v\1", re.sub(r"\ba0\b", "t7", want))
    assert re.fullmatch(r"m3_v\d+", result)
    assert "fg_sin_f32" not in dict(defs)  # only what the body calls
    assert wgsl_math.inline("erf_inv", ["t1"], "m1") is None  # written as WGSL text: called
