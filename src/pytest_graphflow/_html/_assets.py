"""The page's inline style sheet and script, and the document around a page's body.

The document's Content-Security-Policy is ``default-src 'none'`` with the hashes of exactly
this style sheet and script: the page can load nothing (no font, image, script or fetch), and
no markup that reached it by mistake could run. The script only filters the event table and
links the drawing to it; every page is readable without it.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

__all__ = ["document"]

CSS = """
:root{--ink:#1d2430;--mute:#5d6776;--line:#d5dae1;--ok:#1f7a3a;--bad:#c0262d;--warn:#b86200;
--path:#2458c6;--bg:#f6f7f9}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--ink);margin:0;
background:var(--bg)}
header{background:#1d2430;color:#fff;padding:14px 22px}
header h1{font-size:19px;margin:0 0 4px}
header .meta{color:#c9d1dc;font-size:13px}
.status{display:inline-block;padding:1px 8px;border-radius:9px;font-weight:600;color:#fff}
.status.completed{background:var(--ok)}.status.failed,.status.raised{background:var(--bad)}
.status.interrupted{background:var(--warn)}.status.running,.status.cancelled{background:#6b7380}
main{padding:10px 22px 40px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;margin:14px 0;
padding:10px 16px;overflow-x:auto;content-visibility:auto;contain-intrinsic-size:auto 600px}
h2{font-size:16px;margin:4px 0 10px}h3{font-size:14px;margin:12px 0 6px}
.note{color:var(--mute);font-size:12.5px}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #eceff3;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5;position:sticky;top:0}
td.v,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;
word-break:break-all;margin:0}
svg text{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
svg.graph .node rect{fill:#fff;stroke:#8a94a3;stroke-width:1.3}
svg.graph .node text{text-anchor:middle;fill:var(--ink)}
svg.graph .node.ran rect{fill:#e6edfb;stroke:var(--path);stroke-width:2}
svg.graph .node.terminal rect{fill:#eef0f3}
svg.graph .node.halt rect{fill:#fde5e5;stroke:var(--bad);stroke-width:3}
svg.graph .node{cursor:pointer}
svg.graph .edge path{fill:none;stroke:#9aa3b1;stroke-width:1.3}
svg.graph .edge.branch path{stroke-dasharray:6 4}svg.graph .edge.dynamic path{stroke-dasharray:2 3}
svg.graph .edge.error path{stroke:#d9898c}
svg.graph .edge.taken path{stroke:var(--path);stroke-width:3.2}
svg.graph .edge text{fill:var(--mute);font-size:11px}
svg.timeline .tick line{stroke:#e3e6ea}svg.timeline .tick text{fill:var(--mute);text-anchor:middle}
svg.timeline .who{text-anchor:end;fill:var(--ink)}
svg.timeline .note,svg.timeline .axis-note{fill:var(--mute);font-size:11px}
svg.timeline .lane rect{fill:#6f95e0}svg.timeline .lane.replayed rect{fill:#b7c3d6}
svg.timeline .lane.retried rect{fill:#d9a441}svg.timeline .lane.paused rect{fill:var(--warn)}
svg.timeline .lane.failed rect{fill:var(--bad)}svg.timeline .lane.running rect{fill:#9aa3b1}
svg.timeline .checkpoint{fill:var(--ok)}svg.timeline .fault{stroke:var(--bad);stroke-width:2}
tr.added td.after{background:#e3f6e8}tr.removed td.before{background:#fde5e5}
tr.changed td.before{background:#fdf1e0}tr.changed td.after{background:#e3f6e8}
tr.t-error td,tr.t-interrupt td{color:var(--bad)}tr.t-run_start td,tr.t-run_end td{font-weight:600}
tr.first-diff td{background:#fde5e5;font-weight:600}tr.differs td{background:#fff6e5}
.filters{display:flex;gap:10px;align-items:center;margin:0 0 8px;flex-wrap:wrap}
.scroll{max-height:560px;overflow:auto}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.pair>div{min-width:0;overflow-x:auto}
.verdict{border-left:4px solid var(--bad);padding:6px 10px;background:#fff4f4;
white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:12.5px}
"""

JS = """
(function(){
var table=document.getElementById('events');
if(table){
var rows=Array.prototype.slice.call(table.tBodies[0].rows);
var ft=document.getElementById('f-type'),fn=document.getElementById('f-node'),
fq=document.getElementById('f-text'),shown=document.getElementById('shown');
var apply=function(){var t=ft.value,n=fn.value,q=fq.value.toLowerCase(),k=0;
rows.forEach(function(r){var ok=(!t||r.dataset.type===t)&&(!n||r.dataset.node===n)&&
(!q||r.textContent.toLowerCase().indexOf(q)>=0);r.hidden=!ok;if(ok)k++;});
shown.textContent=String(k);};
[ft,fn].forEach(function(e){e.addEventListener('change',apply);});
fq.addEventListener('input',apply);
document.querySelectorAll('svg.graph .node, svg.timeline .lane').forEach(function(g){
g.addEventListener('click',function(){var name=g.getAttribute('data-node');
if(Array.prototype.some.call(fn.options,function(o){return o.value===name;})){
fn.value=fn.value===name?'':name;apply();table.scrollIntoView();}});});
apply();}
document.body.setAttribute('data-ready','yes');
})();
"""


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def document(title: str, body: str) -> str:
    """A whole HTML document: ``title`` (escaped here) and ``body`` (HTML, already escaped)."""
    policy = (f"default-src 'none'; style-src 'sha256-{_sha256(CSS)}'; "
              f"script-src 'sha256-{_sha256(JS)}'; base-uri 'none'; form-action 'none'")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n<body>{body}"
            f"<script>{JS}</script></body></html>\n")
