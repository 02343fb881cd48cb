"""One self-contained HTML page for laid-out graphs: inline SVG, CSS and a little JavaScript
(collapse/expand of groups, hover details, pan and zoom, highlights). No network access: the
page references no URL.

A page holds one or two panels (a forward graph, and a backward one beside it linked by the
user's source line), and an optional side panel listing the fusion plan's steps (kernels,
matrix products, library calls) with their buffers and, when profiled, their times.
"""

from __future__ import annotations

import colorsys
import json
from html import escape

from fungrad.viz.graph import Graph
from fungrad.viz.layout import HEADER_H, PAD, Layout, node_text

__all__ = ["Panel", "render_page"]

PANEL_GAP = 80.0


class Panel:
    """A titled graph with its layout; ``kernels``: node id -> step keys (fusion overlay)."""

    def __init__(self, title: str, graph: Graph, lay: Layout, kernels=None, collapsed=()):
        self.title, self.graph, self.layout = title, graph, lay
        self.kernels: dict[str, list[str]] = kernels or {}
        self.collapsed = set(collapsed)


def _colour(i: int) -> str:
    r, g, b = colorsys.hls_to_rgb((i * 0.618034) % 1.0, 0.80, 0.65)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _stroke(i: int) -> str:
    r, g, b = colorsys.hls_to_rgb((i * 0.618034) % 1.0, 0.38, 0.70)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _panel_svg(p: Panel, pid: str, ox: float, oy: float, kcolour: dict[str, int]) -> list[str]:
    g, lay = p.graph, p.layout
    parts = [
        f'<g class="panel" id="{pid}" data-title="{escape(p.title)}">'
        f'<text class="ptitle" x="{ox:.1f}" y="{oy - 12:.1f}">{escape(p.title)}</text>'
    ]

    def edge_svg(e):
        x1, y1, w1, h1 = lay.boxes[e.src]
        x2, y2, w2, _ = lay.boxes[e.dst]
        ax, ay, bx, by = x1 + w1 / 2 + ox, y1 + h1 + oy, x2 + w2 / 2 + ox, y2 + oy
        my = (ay + by) / 2
        return (
            f'<g class="edge" data-src="{pid}-{e.src}" data-dst="{pid}-{e.dst}">'
            f'<path d="M{ax:.1f},{ay:.1f} C{ax:.1f},{my:.1f} {bx:.1f},{my:.1f} {bx:.1f},{by:.1f}"/>'
            f'<text x="{(ax + bx) / 2 + 3:.1f}" y="{my + 3:.1f}">{escape(e.label)}</text></g>'
        )

    edges_in: dict[str | None, list] = {}
    for e in g.edges:
        edges_in.setdefault(g.nodes[e.dst].group, []).append(e)

    def node_svg(nid: str) -> list[str]:
        n = g.nodes[nid]
        x, y, w, h = lay.boxes[nid]
        x, y = x + ox, y + oy
        ks = p.kernels.get(nid, [])
        attrs = f'id="{pid}-{nid}" data-kind="{n.kind}" data-box="{x:.1f} {y:.1f} {w:.1f} {h:.1f}"'
        if n.source_key:
            attrs += f' data-src-key="{escape(n.source_key)}"'
        if ks:
            attrs += f' data-kernels="{escape(" ".join(ks))}"'
        tip = n.label + (f"\n→ {n.detail}" if n.detail else "")
        if n.source:
            tip += f"\n{n.source}"
        if ks:
            tip += f"\nkernels: {', '.join(ks)}"
        style = ""
        if ks:
            i = kcolour[ks[0]]
            style = f' style="fill:{_colour(i)};stroke:{_stroke(i)}"'
        out = []
        if n.children:
            cls = "group" + (
                " collapsed" if n.children and any(c in p.collapsed for c in n.children) else ""
            )
            out.append(
                f'<g class="{cls} node" {attrs} data-h="{h:.1f}" data-eqns="'
                f'{sum(g.groups[c].n_eqns for c in n.children)}">'
                f"<title>{escape(tip)}</title>"
                f'<rect class="frame" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}"'
                f"{style}/>"
                f'<g class="hdr"><rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                f'height="{HEADER_H}"/>'
                f'<text x="{x + 6:.1f}" y="{y + 15:.1f}">▾ {escape(node_text(n.label))}</text></g>'
                f'<g class="body">'
            )
            for gid in n.children:
                gx, gy, gw, gh = lay.groups[gid]
                grp = g.groups[gid]
                out.append(
                    f'<g class="sub" id="{pid}-{gid}"><rect x="{gx + ox:.1f}" y="{gy + oy:.1f}" '
                    f'width="{gw:.1f}" height="{gh:.1f}"/><text x="{gx + ox + 4:.1f}" '
                    f'y="{gy + oy + 13:.1f}">{escape(grp.label)}</text>'
                )
                out.extend(edge_svg(e) for e in edges_in.get(gid, ()))
                for m in grp.nodes:
                    out.extend(node_svg(m))
                out.append("</g>")
            out.append("</g></g>")
            return out
        out.append(
            f'<g class="node {n.kind}" {attrs}><title>{escape(tip)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5"{style}/>'
            f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}">'
            f"{escape(node_text(n.label))}</text></g>"
        )
        return out

    parts.extend(edge_svg(e) for e in edges_in.get(None, ()))
    for nid in g.top:
        parts.extend(node_svg(nid))
    parts.append("</g>")
    return parts


def _fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def _side_panel(steps: list[dict], profile: dict | None, note: str, summary: str) -> str:
    if not steps and not note:
        return ""
    rows = [f'<div id="side"><h3>Fusion plan: {len(steps)} steps</h3>']
    if summary:
        rows.append(f'<p class="summary">{escape(summary)}</p>')
    if note:
        rows.append(f'<p class="note">{escape(note)}</p>')
    for i, s in enumerate(steps):
        key = s["name"]
        badge = ""
        if profile and key in profile:
            badge = f' <span class="badge">{escape(_fmt_time(float(profile[key])))}</span>'
        body = []
        if "loops" in s:
            body.append(f"loops {s['loops']}" + (" parallel" if s.get("parallel") else ""))
        if "gemm" in s:
            body.append(f"gemm {s['gemm']}")
        if s.get("fuses"):
            body.append("fuses " + ", ".join(s["fuses"]))
        body += [f"writes {b}" for b in s["writes"]] + [f"reads {b}" for b in s["reads"]]
        rows.append(
            f'<div class="step{" nested" if s.get("parent") else ""}" data-kernel="{escape(key)}" '
            f'style="border-left:6px solid {_stroke(i)}"><b>{escape(s["kind"])} '
            f"{escape(key)}</b>{badge}<br>" + "<br>".join(escape(b) for b in body) + "</div>"
        )
    rows.append("</div>")
    return "".join(rows)


_CSS = """
body{margin:0;font:12px system-ui,sans-serif;display:flex;height:100vh;overflow:hidden}
#view{flex:1;position:relative;background:#fafafa}
svg{width:100%;height:100%;cursor:grab;user-select:none}
.node rect{fill:#fff;stroke:#555;stroke-width:1}
.node text{text-anchor:middle;font:11px ui-monospace,monospace;pointer-events:none}
.node.input rect{fill:#d8ecff;stroke:#2a6fb0}.node.const rect{fill:#eee;stroke:#888}
.node.output rect{fill:#dff5dc;stroke:#2f8a2a}
.group>.frame{fill:#f2f2f8;stroke:#667;stroke-dasharray:4 2}
.group>.hdr rect{fill:#dde;stroke:#667;cursor:pointer}
.group>.hdr text{text-anchor:start;font-weight:bold;pointer-events:none}
.group.collapsed>.body,.group.collapsed>.frame{display:none}
.sub>rect{fill:#fff;fill-opacity:.6;stroke:#aab}
.sub>text{font:10px sans-serif;fill:#556;text-anchor:start}
.edge path{fill:none;stroke:#999;stroke-width:1}
.edge text{font:9px ui-monospace,monospace;fill:#777}
.ptitle{font:bold 15px sans-serif}
.hl>rect,.hl>.hdr rect{stroke:#e00 !important;stroke-width:3 !important}
.dim{opacity:.25}
#info{position:absolute;left:8px;bottom:8px;right:8px;background:#fffe;border:1px solid #ccc;
 padding:4px 8px;font:12px ui-monospace,monospace;white-space:pre-wrap;min-height:1.2em}
#side{width:330px;overflow:auto;border-left:1px solid #ccc;padding:6px;background:#fff}
.step{margin:4px 0;padding:3px 6px;font:11px ui-monospace,monospace;cursor:default}
.nested{margin-left:18px}
.step:hover,.step.hl{background:#ffeccc}.badge{background:#333;color:#fff;border-radius:8px;
 padding:0 6px;font-size:10px}.note{color:#a40}
"""

_JS = """
(function(){
const svg=document.getElementById('graph'),info=document.getElementById('info');
let vb=svg.viewBox.baseVal;
(function fit(){const r=svg.getBoundingClientRect();if(!r.width||!r.height)return;
 const W=vb.width,s=Math.max(Math.min(r.width/W,1),0.35);  // fit the width, at most 1:1
 vb.width=r.width/s;vb.height=r.height/s;vb.x=Math.min(0,(W-vb.width)/2);vb.y=0;})();
const HDR=%HDR%,PAD=%PAD%;
// A collapsed group shrinks to its header and what lies below it in its jaxpr moves up (and
// down again on expanding), up through the enclosing groups; edges are redrawn to follow.
function box(n){return n.getAttribute('data-box').split(' ').map(Number);}
function dy(n){return +(n.getAttribute('data-dy')||0);}
function setDy(n,v){n.setAttribute('data-dy',v);n.setAttribute('transform','translate(0,'+v+')');}
function visH(n){return n.classList.contains('group')?
 (n.classList.contains('collapsed')?HDR:+n.getAttribute('data-h')):box(n)[3];}
function redraw(c){for(const e of c.children){if(!e.classList.contains('edge'))continue;
 const a=document.getElementById(e.getAttribute('data-src')),
  b=document.getElementById(e.getAttribute('data-dst'));if(!a||!b)continue;
 const A=box(a),B=box(b),ax=A[0]+A[2]/2,ay=A[1]+dy(a)+visH(a),bx=B[0]+B[2]/2,by=B[1]+dy(b),
  my=(ay+by)/2;
 e.querySelector('path').setAttribute('d','M'+ax+','+ay+' C'+ax+','+my+' '+bx+','+my+' '+bx+','+by);
 const t=e.querySelector('text');if(t){t.setAttribute('x',(ax+bx)/2+3);t.setAttribute('y',my+3);}}}
function shift(n,bottom,delta){if(!delta)return;const c=n.parentNode;
 for(const m of c.children){if(m===n||!m.classList.contains('node'))continue;
  if(box(m)[1]+dy(m)>=bottom-0.5)setDy(m,dy(m)+delta);}
 redraw(c);
 if(!c.classList.contains('sub'))return;
 const r=c.querySelector(':scope>rect');r.setAttribute('height',+r.getAttribute('height')+delta);
 const o=c.parentNode.parentNode,old=+o.getAttribute('data-h'),
  hs=[...o.querySelectorAll(':scope>.body>.sub>rect')].map(x=>+x.getAttribute('height')),
  h=HDR+2*PAD+Math.max(...hs);
 o.setAttribute('data-h',h);o.querySelector(':scope>.frame').setAttribute('height',h);
 if(!o.classList.contains('collapsed'))shift(o,box(o)[1]+dy(o)+old,h-old);}
function toggle(g){const old=visH(g);g.classList.toggle('collapsed');
 const t=g.querySelector(':scope>.hdr text');
 if(t)t.textContent=(g.classList.contains('collapsed')?'▸':'▾')+t.textContent.slice(1);
 shift(g,box(g)[1]+dy(g)+old,visH(g)-old);}
// groups the page starts with collapsed were laid out expanded: collapse them, innermost first
[...document.querySelectorAll('.group.collapsed')].reverse().forEach(g=>{
 g.classList.remove('collapsed');toggle(g);});
window.fgToggle=toggle;
function clear(){document.querySelectorAll('.hl').forEach(x=>x.classList.remove('hl'));}
function linked(n){const k=n.getAttribute('data-src-key');
 return k?document.querySelectorAll('[data-src-key="'+k+'"]'):[n];}
// an equation and those of the same source line (forward <-> backward), and its steps
function show(n){clear();linked(n).forEach(x=>x.classList.add('hl'));
 const ks=(n.getAttribute('data-kernels')||'').split(' ').filter(Boolean);
 ks.forEach(k=>{const s=document.querySelector('.step[data-kernel="'+k+'"]');
  if(s)s.classList.add('hl');});
 const t=n.querySelector('title');info.textContent=(t?t.textContent:'')+
  (n===pinned?'\\n(pinned: click it again to release)':'');}
let pinned=null;  // a clicked equation keeps its highlight until clicked again
svg.addEventListener('click',e=>{const h=e.target.closest('.hdr');
 if(h){toggle(h.parentNode);e.stopPropagation();return;}
 const n=e.target.closest('.node');pinned=n&&n!==pinned?n:null;
 if(pinned)show(pinned);else clear();});
svg.addEventListener('mouseover',e=>{const n=e.target.closest('.node');
 if(n&&!pinned)show(n);});
document.querySelectorAll('.step').forEach(s=>{s.addEventListener('mouseenter',()=>{
 if(pinned)return;clear();const k=s.getAttribute('data-kernel');s.classList.add('hl');
 document.querySelectorAll('.node[data-kernels]').forEach(n=>{
  if(n.getAttribute('data-kernels').split(' ').includes(k))n.classList.add('hl');});});});
svg.addEventListener('wheel',e=>{e.preventDefault();const r=svg.getBoundingClientRect();
 const f=e.deltaY>0?1.15:1/1.15,px=vb.x+(e.clientX-r.left)/r.width*vb.width,
 py=vb.y+(e.clientY-r.top)/r.height*vb.height;
 vb.x=px-(px-vb.x)*f;vb.y=py-(py-vb.y)*f;vb.width*=f;vb.height*=f;},{passive:false});
let drag=null;svg.addEventListener('mousedown',e=>{if(e.target.closest('.hdr'))return;
 drag=[e.clientX,e.clientY,vb.x,vb.y];});
window.addEventListener('mouseup',()=>drag=null);
window.addEventListener('mousemove',e=>{if(!drag)return;const r=svg.getBoundingClientRect();
 vb.x=drag[2]-(e.clientX-drag[0])*vb.width/r.width;
 vb.y=drag[3]-(e.clientY-drag[1])*vb.height/r.height;});
})();
"""


def render_page(
    title: str,
    panels: list[Panel],
    steps: list[dict] | None = None,
    profile: dict | None = None,
    note: str = "",
    summary: str = "",
) -> str:
    """The page's HTML (see the module docstring)."""
    steps = steps or []
    kcolour = {s["name"]: i for i, s in enumerate(steps)}
    body, x, height = [], 20.0, 0.0
    for i, p in enumerate(panels):
        body.extend(_panel_svg(p, f"p{i}", x, 40.0, kcolour))
        x += p.layout.width + PANEL_GAP
        height = max(height, p.layout.height)
    width, height = max(x - PANEL_GAP + 20, 200.0), height + 60
    meta = {"panels": [p.title for p in panels], "steps": [s["name"] for s in steps]}
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<div id="view"><svg id="graph" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" preserveAspectRatio="xMinYMin meet">'
        + "".join(body)
        + '</svg><div id="info">hover a node: its types, source line and kernels; click a '
        "group header to collapse or expand it; drag to pan, wheel to zoom</div></div>"
        + _side_panel(steps, profile, note, summary)
        + f"<script type='application/json' id='fg-meta'>{escape(json.dumps(meta))}</script>"
        + "<script>"
        + _JS.replace("%HDR%", str(HEADER_H)).replace("%PAD%", str(PAD))
        + "</script></body></html>"
    )
