"""Regenerate docs/img/viz.png: fg.viz of an MLP's gradient with the CPU fusion plan laid
over it, rendered by headless Chromium (tests/_cdp.py drives it over the DevTools pipe).

    .venv/bin/python tools/make_viz_screenshot.py [out.png]
"""

from __future__ import annotations

import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import fungrad as fg  # noqa: E402
import fungrad.numpy as fnp  # noqa: E402
from fungrad.viz import viz  # noqa: E402
from tests import _cdp  # noqa: E402


def loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = fnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    return fnp.mean((logits - y) ** 2)


def main(out: str) -> int:
    rng = np.random.default_rng(0)
    params = (
        (rng.normal(size=(784, 128)).astype(np.float32), np.zeros(128, np.float32)),
        (rng.normal(size=(128, 10)).astype(np.float32), np.zeros(10, np.float32)),
    )
    x = np.ones((32, 784), np.float32)
    y = np.zeros((32, 10), np.float32)
    v = viz(fg.grad(loss), params, x, y, fusion=True, title="MLP gradient")
    with tempfile.TemporaryDirectory() as d:
        page = v.save(os.path.join(d, "viz.html"))
        with _cdp.Browser(timeout=60, size=(1400, 860)) as b:
            b.goto("file://" + page)
            # hover the forward tanh: its backward equations light up
            b.eval(
                "document.querySelector('#p0 .node[data-kind=eqn][data-src-key]')"
                "&&[...document.querySelectorAll('#p0 .node[data-kind=eqn]')].find("
                "n=>n.querySelector('title').textContent.startsWith('tanh'))"
                ".dispatchEvent(new MouseEvent('mouseover',{bubbles:true}))"
            )
            png = b.screenshot()
    with open(out, "wb") as f:
        f.write(png)
    print(f"{out}: {len(png)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs/img/viz.png")))
