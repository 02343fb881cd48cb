"""fg.viz's page in a real headless Chromium (driven through the DevTools protocol over pipes,
tests/_cdp.py): nodes and groups are there, a click on a group header collapses and expands
it, hovering links a backward equation to its forward line, a screenshot is not blank.
Skipped when no Chromium-family browser is installed."""

import struct
import zlib

import numpy as np
import pytest

import fungrad as fg
import fungrad.numpy as fnp
from fungrad.viz import viz
from tests import _cdp

BROWSER = _cdp.find_browser()
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no chromium/chromium-browser/google-chrome on PATH (apt-get install chromium)",
)


def model(w, x):
    h = fnp.tanh(x @ w)
    y = fg.lax.cond(h.sum() > 0, lambda h: h * 2.0, lambda h: fnp.sin(h), h)
    return fnp.sum(y**2)


ARGS = (np.full((4, 3), 0.1, np.float32), np.ones((2, 4), np.float32))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    path = tmp_path_factory.mktemp("viz") / "page.html"
    viz(fg.grad(model), *ARGS, fusion=True, path=path)
    with _cdp.Browser(BROWSER, timeout=30) as b:
        b.goto(path.as_uri())
        yield b


def png_pixels(png: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """``(width, height, pixels)`` of an 8-bit RGB/RGBA PNG (a small decoder: the five
    filter types of the PNG spec, undone row by row)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(png):
        (n,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, pixels = bytearray(stride), []
    for y in range(h):
        kind, row = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + a) & 255
            elif kind == 2:
                row[i] = (row[i] + b) & 255
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels.extend(tuple(row[i : i + 3]) for i in range(0, stride, bpp))
        prev = row
    return w, h, pixels


def small_screenshot(b) -> bytes:
    """The viewport at 1/8 scale (a few thousand pixels: quick to decode)."""
    import base64

    size = b.eval("[innerWidth, innerHeight]")
    clip = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 0.125}
    return base64.b64decode(b.call("Page.captureScreenshot", format="png", clip=clip)["data"])


def test_nodes_and_groups_exist(page):
    assert page.eval("document.querySelectorAll('.panel').length") == 2
    assert page.eval("document.querySelectorAll('.node[data-kind=eqn]').length") > 10
    assert page.eval("document.querySelectorAll('.group').length") >= 2
    assert page.eval("document.querySelectorAll('.step').length") >= 2
    assert "test_viz_browser.py" in page.eval(
        "document.querySelector('.node[data-kind=eqn] title').textContent"
    )


def test_click_group_header_collapses_then_expands(page):
    js_box = """(()=>{const g=document.querySelector('.group');g.id=g.id||'g';
      g.scrollIntoView();const r=g.querySelector(':scope>.hdr rect').getBoundingClientRect();
      return [g.id, r.x + r.width / 2, r.y + r.height / 2]})()"""
    gid, x, y = page.eval(js_box)
    state = f"document.getElementById('{gid}').classList.contains('collapsed')"
    body = f"getComputedStyle(document.getElementById('{gid}').querySelector('.body')).display"
    # the panel's last output lies below the group: it moves up while the group is collapsed
    below = (
        f"document.getElementById('{gid}').closest('.panel')"
        ".querySelector(':scope>.node.output:last-of-type').getBoundingClientRect().y"
    )
    assert page.eval(state) is False and page.eval(body) != "none"
    y0 = page.eval(below)
    page.click(x, y)
    assert page.eval(state) is True and page.eval(body) == "none"
    assert page.eval(below) < y0 - 5
    page.click(x, y)
    assert page.eval(state) is False and page.eval(body) != "none"
    assert abs(page.eval(below) - y0) < 0.5


def test_hover_links_backward_to_forward(page):
    js = """(()=>{const n=document.querySelector('#p1 .node[data-src-key]');
      n.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}));
      const hl=[...document.querySelectorAll('.node.hl')];
      return [hl.some(x=>x.closest('#p0')), hl.some(x=>x.closest('#p1'))]})()"""
    assert page.eval(js) == [True, True]


def test_click_pins_the_linked_highlight(page):
    js_box = """(()=>{const n=[...document.querySelectorAll('#p1 .node[data-src-key]')].find(
      x=>!x.classList.contains('group'));n.id=n.id||'pin';n.scrollIntoView();
      const r=n.querySelector('rect').getBoundingClientRect();
      return [n.id, r.x + r.width / 2, r.y + r.height / 2]})()"""
    nid, x, y = page.eval(js_box)
    page.click(x, y)
    hl = "[...document.querySelectorAll('.node.hl')].map(n=>n.closest('.panel').id)"
    assert {"p0", "p1"} <= set(page.eval(hl))
    # hovering elsewhere does not move a pinned highlight
    page.eval(
        "document.querySelector('#p0 .node.input').dispatchEvent("
        "new MouseEvent('mouseover',{bubbles:true}))"
    )
    assert page.eval(f"document.getElementById('{nid}').classList.contains('hl')")
    page.click(x, y)
    assert page.eval(hl) == []


def test_screenshot_not_blank(page):
    png = page.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    w, h, pixels = png_pixels(small_screenshot(page))
    assert w > 50 and h > 30 and len(pixels) == w * h
    background = max(set(pixels), key=pixels.count)
    drawn = sum(p != background for p in pixels)
    assert len(set(pixels)) > 20 and drawn > 0.02 * len(pixels)


def test_blank_page_reads_blank():
    """The check above tells a blank page from a drawn one."""
    with _cdp.Browser(BROWSER, timeout=30) as b:
        b.goto("about:blank")
        w, h, pixels = png_pixels(small_screenshot(b))
    assert len(set(pixels)) == 1 and len(pixels) == w * h
