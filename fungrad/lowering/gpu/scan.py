"""Cumulative scans (a serial kernel recognised by
:func:`~fungrad.lowering.gpu.schemes.scan_of`): one invocation per line, or
reduce-then-scan over blocks (:func:`render_scan`)."""

from __future__ import annotations

import math

from fungrad.lowering.fusion import Kernel
from fungrad.lowering.gpu.frame import TOP, Scope, Shader, flat_shader
from fungrad.lowering.gpu.schemes import ScanInfo
from fungrad.lowering.gpu.shader import KernelShader
from fungrad.lowering.gpu.types import from_word, to_word, wgsl_type
from fungrad.lowering.kernel import Expr, Var

#: a rounding scan's blocks (see ``ScanShader._subblocked_pass``; a power of two)
SUM_BLOCK = 64


class ScanShader(KernelShader):
    """Writes the passes of a scan (:func:`render_scan`). The scan loop ``s`` is the only
    loop inside the invocation: nodes depending on it are written into its body
    (``lines[s]``), the other loops' indices come from the invocation's line."""

    def __init__(
        self,
        kern: Kernel,
        scan: ScanInfo,
        place,
        fused_fma: bool,
        scope: Scope,
        blocks: int,
        base: int,
    ):
        super().__init__(kern, place, fused_fma, scope)
        self.scan, self.blocks, self.base = scan, blocks, base
        s = scan.var
        self.length = s.extent + 1
        self.block = -(-self.length // blocks)
        self.others = [v for v in kern.loops if v is not s]
        self.rows = math.prod(v.extent for v in self.others)
        for v in self.others:
            self.chain[v] = ()
        self.open_scope(s, None)
        self.trips[s] = self.block
        self.carried: frozenset = frozenset()  # ids of the nodes bound to loop-carried names
        self.uses: dict[tuple[int, frozenset], bool] = {}
        self.in_scan: list[int] = []  # ids of the nodes computed in the scan loop (``_at``)

    def scope(self, e: Expr) -> Var | None:
        """The loop ``e`` is evaluated in; the scan loop for a node reading a value bound to
        a loop-carried name (a combine's ``prev`` and ``elem`` as ``acc``, ``mid``, ``tv``):
        by its free variables alone, a combine of an element that does not vary along the
        scan (a broadcast, ``stack([x, x])``) placed its hidden copy of ``acc`` at the top,
        where ``acc`` is not defined, and any node of that element alone would have been
        cached there and reused by the next combine, whose ``elem`` is another value."""
        if self.carried and self._uses_carried(e):
            return self.scan.var
        return super().scope(e)

    def compute(self, e: Expr) -> str:
        name = super().compute(e)
        where = self.scope(e)
        if where is not None and self.scan.var in self.chain[where]:
            self.in_scan.append(id(e))
        return name

    def _uses_carried(self, e: Expr) -> bool:
        key = (id(e), self.carried)
        got = self.uses.get(key)
        if got is None:
            got = id(e) in self.carried or any(self._uses_carried(a) for a in e.args)
            self.uses[key] = got
        return got

    def _at(self, e: Expr) -> tuple[list[str], str]:
        """(lines, name) computing ``e`` in a block of its own: the names defined there are
        forgotten afterwards, so later uses recompute them in their own blocks."""
        s = self.scan.var
        self.lines[s], self.in_scan = [], []
        name = self.value(e)
        lines, self.lines[s] = self.lines[s], []
        for k in self.in_scan:  # (their statements are in ``lines``)
            self.names.pop(k, None)
        return lines, name

    def _word(self, at: str, write: bool = False) -> str:
        return self.slots.word("arena", self.base, at, write)

    def shader(self, kind: str) -> Shader:
        """One pass: ``"totals"`` (each block but the last folds its elements), ``"prefix"``
        (each line turns its block totals into exclusive prefixes, in place) or ``"scan"``
        (each block folds its elements from its prefix and stores every result)."""
        dt, blocks = self.kern.stores[0].buffer.dtype, self.blocks
        per_row = {"totals": blocks - 1, "prefix": 1, "scan": blocks}[kind]
        head = [f"  let row = flat / {per_row}i;", f"  let blk = flat % {per_row}i;"]
        stride = self.rows
        for v in self.others:
            stride //= v.extent
            q = "row" if stride == 1 else f"(row / {stride}i)"
            head.append(f"  let v{v.id} = {q} % {v.extent}i;")
        if kind == "prefix":
            body, iterations = self._prefix_pass(dt), blocks
        elif not self._subblocked():
            body, iterations = self._exact_pass(kind, dt), self.block + self.iterations
        else:
            body, iterations = self._subblocked_pass(kind, dt), self.block + self.iterations
        name = {
            "totals": f"{self.kern.name}_totals",
            "prefix": f"{self.kern.name}_prefix",
            "scan": self.kern.name,
        }[kind]
        return flat_shader(
            name,
            self.slots,
            self.src,
            self.scope_of,
            self.rows * per_row,
            [*head, *self.lines[None], *body],
            iterations,
        )

    def _combine(self, prev: str, elem: str) -> tuple[list[str], str]:
        """(lines, result) of the scan's combine of the values named ``prev`` and ``elem``."""
        scan = self.scan
        self.names[id(scan.prev)], self.names[id(scan.elem)] = prev, elem
        self.carried = frozenset({id(scan.prev), id(scan.elem)})
        got = self._at(self.kern.stores[0].value)
        self.carried = frozenset()
        del self.names[id(scan.prev)], self.names[id(scan.elem)]
        return got

    def _subblocked(self) -> bool:
        """Does the combine round (a float sum, product, logsumexp: not max/min), so that
        a long serial fold must be split to keep its error bounded?"""
        root = self.kern.stores[0].value
        return wgsl_type(root.dtype) == "f32" and root.op not in ("max", "min")

    def _total(self, b: str) -> str:
        return f"row * {self.blocks}i + {b}"

    def _prefix_pass(self, dt) -> list[str]:
        """Each line's block totals into exclusive prefixes, in place. A rounding combine
        folds them in two levels (groups of ``SUM_BLOCK`` totals, then the groups' totals),
        so the prefixes of many blocks stay within a few roundings."""
        word = lambda b, w=False: self._word(self._total(b), w)  # noqa: E731
        if not self._subblocked():
            combine, r = self._combine("acc", "tv")
            return [
                f"  var acc = {from_word(word('0i'), dt)};",
                f"  for (var b = 1i; b < {self.blocks}i; b++) {{",
                f"    let tv = {from_word(word('b'), dt)};",
                f"    {word('b', True)} = {to_word('acc', dt)};",
                *combine,
                f"    acc = {r};",
                "  }",
            ]
        hi_lo, hl = self._combine("hi", "lo")
        lo_tv, lt = self._combine("lo", "tv")
        t = wgsl_type(dt)
        return [
            f"  var lo = {from_word(word('0i'), dt)};",
            f"  var hi: {t};",
            "  var has_hi = false;",
            "  var lo_fresh = false;",
            f"  for (var b = 1i; b < {self.blocks}i; b++) {{",
            f"    let tv = {from_word(word('b'), dt)};",
            *hi_lo,
            f"    let pre = select(select(lo, {hl}, has_hi), hi, lo_fresh);",
            f"    {word('b', True)} = {to_word('pre', dt)};",
            f"    if (b % {SUM_BLOCK}i == 0i) {{",
            "      hi = pre;",
            "      has_hi = true;",
            "      lo_fresh = true;",
            "    }",
            *lo_tv,
            f"    lo = select({lt}, tv, lo_fresh);",
            "    lo_fresh = false;",
            "  }",
        ]

    def _start(self, first: list[str], p0: str, prefix: str | None) -> list[str]:
        """Lines starting a block: block 0 from the line's first element (stored by an
        earlier kernel), the others from their prefix (``prefix``: its lines)."""
        s = self.scan.var
        t = wgsl_type(self.kern.stores[0].buffer.dtype)
        lines = [
            f"  var acc: {t};",
            f"  let k0 = blk * {self.block}i;",
            f"  let k1 = min(k0 + {self.block}i, {self.length}i);",
            "  var k = k0;",
            "  var fresh = true;",
            "  if (blk == 0i) {",
            f"    let v{s.id} = 0i;",
            *first,
            f"    acc = {p0};",
            "    fresh = false;",
            "    k = 1i;",
            "  }",
        ]
        if prefix is not None:
            lines[-1] = f"  }} else {{ {prefix} }}"
        return lines

    def _exact_pass(self, kind: str, dt) -> list[str]:
        """Totals or scan of a combine that does not round (max/min, integers, bools): one
        running value per block, from its prefix."""
        st, scan, s = self.kern.stores[0], self.scan, self.scan.var
        first, p0 = self._at(scan.prev)
        self.names[id(scan.prev)] = "acc"
        self.lines[s] = []
        r, c = self.value(st.value), self.value(scan.elem)
        prefix = None
        if kind == "scan" and self.blocks > 1:
            prefix = f"acc = {from_word(self._word(self._total('blk')), dt)}; fresh = false;"
        body = self._start(first, p0, prefix)
        update = [f"    acc = select({r}, {c}, fresh);", "    fresh = false;"]
        if kind == "scan":
            update.append(
                f"    {self.slots.ref(st.buffer, self.value(st.index), write=True)}"
                f" = {to_word('acc', dt)};"
            )
        body += [
            "  for (; k < k1; k++) {",
            f"    let v{s.id} = k - 1i;",
            *self.lines[s],
            *update,
            "  }",
        ]
        if kind == "totals":
            body.append(f"  {self._word(self._total('blk'), True)} = {to_word('acc', dt)};")
        return body

    def _subblocked_pass(self, kind: str, dt) -> list[str]:
        """Totals or scan of a rounding combine, in two levels: each ``SUM_BLOCK`` elements
        fold into a local value from scratch (``acc``), ``SUM_BLOCK`` local values into
        ``mid``, and those into ``pre`` (which starts as the block's prefix); an element's
        result is ``pm`` (``pre`` combined with ``mid``) combined with ``acc``, so every result
        is a few roundings from exact (the serial fold's error grew with the length: 3e7
        ones summed to 16777216 and stayed there)."""
        st, scan, s = self.kern.stores[0], self.scan, self.scan.var
        t = wgsl_type(dt)
        first, p0 = self._at(scan.prev)
        with_pm, pa = self._combine("pm", "acc")
        with_mid, ma = self._combine("mid", "acc")
        with_pre, pmid = self._combine("pre", "mid")
        self.names[id(scan.prev)] = "acc"
        self.lines[s] = []
        # the element behind an opaque zero: once the compiler unrolls a short line, an
        # element may be a constant (cumprod of [x, 0] gave 0 for NaN)
        c = self._opaque(self.value(scan.elem), scan.elem)
        self.names[id(scan.elem)] = c
        r = self.value(st.value)
        prefix = None
        if kind == "scan" and self.blocks > 1:
            prefix = (
                f"pre = {from_word(self._word(self._total('blk')), dt)}; "
                "has_pre = true; pm = pre; has_pm = true;"
            )
        body = [f"  var {v}: {t};" for v in ("pre", "mid", "pm")]
        body += [f"  var has_{v} = false;" for v in ("pre", "mid", "pm")]
        body += [
            *self._start(first, p0, prefix),
            "  var last = acc;",
        ]  # (block 0 may hold the first element only)
        update = [
            f"    acc = select({r}, {c}, fresh);",
            "    fresh = false;",
            *with_pm,
            f"    last = select(acc, {pa}, has_pm);",
        ]
        if kind == "scan":
            update.append(
                f"    {self.slots.ref(st.buffer, self.value(st.index), write=True)}"
                f" = {to_word('last', dt)};"
            )
        b = SUM_BLOCK
        update += [
            "    let count = k - k0 + 1i;",
            f"    if (count % {b}i == 0i) {{",
            *with_mid,
            f"      mid = select(acc, {ma}, has_mid);",
            "      has_mid = true;",
            "      fresh = true;",
            *with_pre,
            f"      pm = select(mid, {pmid}, has_pre);",
            "      has_pm = true;",
            f"      if (count % {b * b}i == 0i) {{",
            "        pre = pm;",
            "        has_pre = true;",
            "        has_mid = false;",
            "      }",
            "    }",
        ]
        body += [
            "  for (; k < k1; k++) {",
            f"    let v{s.id} = k - 1i;",
            *self.lines[s],
            *update,
            "  }",
        ]
        if kind == "totals":
            body.append(f"  {self._word(self._total('blk'), True)} = {to_word('last', dt)};")
        return body


def render_scan(
    kern: Kernel,
    scan: ScanInfo,
    place,
    fused_fma: bool = True,
    scope: Scope = TOP,
    blocks: int = 1,
    base: int = 0,
) -> list[Shader]:
    """The dispatches of a scan (:func:`scan_of`) whose lines (the other loops) are split
    into ``blocks`` blocks of consecutive elements. One block: one invocation per line runs
    the line in order (one dispatch). More (a line longer than an invocation may loop, or
    too few lines to fill the device): reduce, scan the totals, scan again: ``totals`` has
    an invocation per line and block (the last excepted) fold the block into the arena at
    word ``base`` (``rows * blocks`` words), ``prefix`` has an invocation per line turn its
    totals into exclusive prefixes, and ``scan`` has an invocation per line and block fold
    its block again, starting from its prefix, storing each result. No barriers (llvmpipe
    runs a workgroup's barriers as coroutine switches: slow); 3 dispatches, reading the
    operand twice. The combine is reassociated, so float sums and products may round
    differently from the serial loop (max/min and integer results are exact)."""

    def make(kind: str) -> Shader:
        return ScanShader(kern, scan, place, fused_fma, scope, blocks, base).shader(kind)

    if blocks == 1:
        return [make("scan")]
    return [make("totals"), make("prefix"), make("scan")]
