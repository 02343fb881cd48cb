"""What every compute shader shares: its bindings, its place in control flow, its grid and
the text around its body; and the small shaders that move words (loop counters, copies,
fills).

A :class:`Shader` is WGSL text plus how to dispatch it. :class:`Slots` numbers the device
buffers a shader touches (each an ``array<u32>`` addressed as slot key + word offset).
A :class:`Scope` says which loops and cond branches enclose a step: loop counters are
words of the ``ctl`` buffer, branch guards read their index buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

from fungrad.lowering.fusion import LoweringError
from fungrad.lowering.gpu.helpers import Prelude
from fungrad.lowering.gpu.types import from_word, wgsl_type

WORKGROUP = 64
MAX_GROUPS = 65535


@dataclass
class Shader:
    """One compute shader and how to dispatch it.

    ``bindings``: (slot key, writable) per ``@binding(i)``: the device buffer the executable
    binds there. ``grid``: workgroups in x, y, z (0 workgroups: nothing to run).
    ``loop_iterations``: loop iterations one invocation runs, all loops together (an upper
    bound; some adapters stop an invocation's loops after 65535: ``gpu.Runtime.loop_limit``)."""

    name: str
    source: str
    bindings: list[tuple[str, bool]]
    grid: tuple[int, int, int]
    loop_iterations: int = 0


def grid_1d(invocations: int, per_group: int) -> tuple[int, int, int]:
    """Workgroups for ``invocations`` flat invocations: 2-D beyond 65535 groups."""
    if invocations >= 2**31:  # (invocations are numbered by an i32)
        raise LoweringError(
            f"jit(backend='gpu'): {invocations} invocations (one per element) "
            "exceed the 2**31 - 1 a shader can number; split the array or use "
            "backend='cpu'"
        )
    groups = -(-invocations // per_group)
    if groups <= MAX_GROUPS:
        return (groups, 1, 1)
    y = -(-groups // MAX_GROUPS)
    if y > MAX_GROUPS:
        raise LoweringError(
            f"jit(backend='gpu'): {invocations} invocations exceed the "
            f"{MAX_GROUPS}x{MAX_GROUPS} workgroup grid"
        )
    return (MAX_GROUPS, y, 1)


@dataclass(frozen=True)
class Scope:
    """Where a step runs inside control flow (the GPU runs loops by re-dispatching bodies).

    ``loops``: enclosing loops; loop ``d``'s iteration count is word ``d`` of the ``ctl``
    buffer, read as ``it<d>`` (a view's offset, such as a scan's row of ``xs``, is an
    expression in it). ``guards``: enclosing ``cond`` branches as (index buffer, branch,
    number of branches): the step does nothing unless every index selects its branch."""

    loops: int = 0
    guards: tuple = ()


TOP = Scope()


class Slots:
    """Binding numbers of the device buffers a shader touches."""

    def __init__(self, place: dict[int, tuple[str, int | str]]):
        self.place = place
        self.keys: dict[str, int] = {}
        self.writable: set[str] = set()
        self.atomic: set[str] = set()  # bound as array<atomic<u32>>: read with atomicLoad

    def ref(self, buf, index: str, write: bool = False) -> str:
        key, offset = self.place[buf.id]
        return self.word(key, offset, index, write)

    def word(self, key: str, offset: int | str, index: str, write: bool = False) -> str:
        b = self.keys.setdefault(key, len(self.keys))
        if write:
            self.writable.add(key)
        if isinstance(offset, str):
            at = f"{offset} + {index}"
        else:
            at = index if offset == 0 else f"{offset}i + {index}"
        if key in self.atomic:
            return f"atomicLoad(&b{b}[{at}])" if not write else f"&b{b}[{at}]"
        return f"b{b}[{at}]"

    def scope_lines(self, scope: Scope) -> tuple[list[str], str | None]:
        """(lines defining ``it<d>``, the guard condition or None) for ``scope``."""
        lines = [
            f"  let it{d} = bitcast<i32>({self.word('ctl', 0, f'{d}i')});"
            for d in range(scope.loops)
        ]
        conds = []
        for j, (index, branch, n) in enumerate(scope.guards):
            raw = from_word(self.ref(index, "0i"), index.dtype)
            value = f"i32({raw})" if wgsl_type(index.dtype) != "i32" else raw
            lines.append(f"  let sel{j} = clamp({value}, 0i, {n - 1}i);")
            conds.append(f"sel{j} == {branch}i")
        return lines, " && ".join(conds) or None

    def declarations(self) -> list[str]:
        out = []
        for key, b in self.keys.items():
            access = "read_write" if key in self.writable else "read"
            t = "atomic<u32>" if key in self.atomic else "u32"
            out.append(f"@group(0) @binding({b}) var<storage, {access}> b{b}: array<{t}>;")
        return out

    def bindings(self) -> list[tuple[str, bool]]:
        return [(k, k in self.writable) for k in self.keys]


def workgroup_text(
    slots: Slots,
    src: Prelude,
    shared: list[str],
    size: int,
    head: list[str],
    guard: str | None,
    body: list[str],
) -> str:
    """The text of a shader whose workgroups (``size`` invocations, ``lid``; ``wid``/``nwg``:
    the workgroup's index and the grid) cooperate through workgroup memory (``shared``
    declarations). Barriers need uniform control flow, so the guard of a cond's branch is
    made uniform through workgroup memory (``fg_run``) after ``head``."""
    if guard is not None:
        head = [
            *head,
            "  if (lid == 0u) {",
            f"    fg_run = select(0u, 1u, {guard});",
            "  }",
            "  if (workgroupUniformLoad(&fg_run) == 0u) { return; }",
        ]
    return "\n".join(
        [
            *slots.declarations(),
            "",
            src.prelude(),
            "",
            *shared,
            *(["var<workgroup> fg_run: u32;"] if guard is not None else []),
            "",
            f"@compute @workgroup_size({size})",
            "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
            "@builtin(num_workgroups) nwg: vec3<u32>, "
            "@builtin(local_invocation_index) lid: u32) {",
            *head,
            *body,
            "}",
            "",
        ]
    )


def flat_shader(
    name: str,
    slots: Slots,
    src: Prelude,
    scope: Scope,
    invocations: int,
    body: list[str],
    iterations: int = 0,
) -> Shader:
    """A shader of ``invocations`` invocations (``flat``) running ``body`` under ``scope``."""
    head, guard = slots.scope_lines(scope)
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    lines = [
        *head,
        f"  let flat = i32(gid.x + gid.y * nwg.x * {WORKGROUP}u);",
        f"  if (flat >= {invocations}i) {{ return; }}",
        *body,
    ]
    text = "\n".join(
        [
            *slots.declarations(),
            "",
            src.prelude(),
            "",
            f"@compute @workgroup_size({WORKGROUP})",
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
            "@builtin(num_workgroups) nwg: vec3<u32>) {",
            *lines,
            "}",
            "",
        ]
    )
    grid = grid_1d(invocations, WORKGROUP) if invocations else (0, 1, 1)
    return Shader(name, text, slots.bindings(), grid, iterations)


def render_counter(d: int, value: str, place, scope: Scope = TOP) -> Shader:
    """A one-invocation shader setting loop counter ``d`` (word ``d`` of ``ctl``) to the
    i32 expression ``value`` (of ``it<d>`` and the outer counters), under ``scope``'s
    guards."""
    slots = Slots(place)
    head, guard = slots.scope_lines(Scope(max(scope.loops, d + 1), scope.guards))
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    head.append(f"  {slots.word('ctl', 0, f'{d}i', write=True)} = bitcast<u32>({value});")
    text = "\n".join(
        [*slots.declarations(), "", "@compute @workgroup_size(1)", "fn main() {", *head, "}", ""]
    )
    return Shader(f"counter{d}", text, slots.bindings(), (1, 1, 1))


def render_copy(
    dst: tuple[str, int | str], src: tuple[str, int | str], words: int, scope: Scope = TOP
) -> Shader:
    """``words`` words from ``src`` to ``dst`` (slot key, offset), e.g. a while loop's final
    carry from its spare buffer home (WebGPU cannot copy a buffer onto itself)."""
    return _word_shader("copy", dst, words, scope, lambda slots: slots.word(*src, "flat"))


def render_fill(dst: tuple[str, int | str], words: int, scope: Scope = TOP) -> Shader:
    """``words`` zero words at ``dst`` (slot key, offset)."""
    return _word_shader("fill", dst, words, scope, lambda slots: "0u")


def _word_shader(name: str, dst, words: int, scope: Scope, value) -> Shader:
    """One invocation per word ``flat`` of ``dst``, storing ``value(slots)``."""
    slots = Slots({})
    head, guard = slots.scope_lines(scope)
    if guard is not None:
        head.append(f"  if (!({guard})) {{ return; }}")
    head += [
        f"  let flat = i32(gid.x + gid.y * nwg.x * {WORKGROUP}u);",
        f"  if (flat >= {words}i) {{ return; }}",
        f"  {slots.word(*dst, 'flat', write=True)} = {value(slots)};",
    ]
    text = "\n".join(
        [
            *slots.declarations(),
            "",
            f"@compute @workgroup_size({WORKGROUP})",
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
            "@builtin(num_workgroups) nwg: vec3<u32>) {",
            *head,
            "}",
            "",
        ]
    )
    return Shader(name, text, slots.bindings(), grid_1d(words, WORKGROUP))
