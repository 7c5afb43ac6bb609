"""Write the page: one HTML string with the CSS, the script and the data inline."""

from __future__ import annotations

import html
import json
import math
from typing import Any, Dict

from ampconv.report.html.script import ERROR_HOOK, SCRIPT
from ampconv.report.html.style import CSS

DATA_ID = "report-data"

_BODY = """<header><h1>ampconv report</h1><div class="sub" id="title-sub"></div></header>
<main>
<pre id="js-errors"></pre>
<section id="verdict" class="verdict"><div class="v-title" id="verdict-title"></div>
<div class="v-detail" id="verdict-detail"></div><div class="v-todo" id="verdict-todo"></div>
<div class="fix-row" id="fix-row"><pre id="fix-command"></pre><button type="button" id="copy-fix">Copy</button></div>
</section>
<section id="summary"><h2>Summary</h2><div class="grid" id="facts"></div><div class="kv" id="facts-kv"></div>
<ul class="msgs" id="messages"></ul></section>
<section><h2>Op types</h2>
<table class="ops"><thead><tr><th>op type</th><th>LOW</th><th>HIGH</th><th>no float</th><th></th></tr></thead>
<tbody id="ops-body"></tbody></table>
<p class="note">LOW and HIGH per op type, as in the text summary. Click a row to list its nodes below.</p></section>
<section><h2>Precision of every node, in topological order</h2>
<div class="legend"><span><i class="sw" style="background:var(--low)"></i>LOW</span>
<span><i class="sw" style="background:var(--high)"></i>float32 (HIGH)</span>
<span id="legend-fallback" hidden><i class="sw" style="background:var(--fallback)"></i>fallback type (FALLBACK: bf16 where
fp16 overflows)</span>
<span><i class="sw" style="background:var(--none)"></i>no float data</span>
<span><i class="sw" style="background:#fff;border:3px solid #999;box-shadow:inset 0 0 0 2px #111"></i>Cast node of the model</span>
<span>rows: node-name scopes (a subgraph's nodes come right before the If/Loop/Scan that runs them)</span></div>
<div class="strip-wrap" id="strip-wrap"><canvas id="strip"></canvas>
<div class="strip-scroll" id="strip-scroll"><div id="strip-spacer"></div></div></div>
<div id="details">Hover over a node for its decision; click it to select it.</div></section>
<section id="chart-section"><h2>Error along the graph</h2>
<div class="legend" id="chart-legend">
<span class="lg-prop"><i class="sw" style="background:#2f7ed8"></i>propagated error of each node's output
(validation --localize, one sample: RMS error / RMS of the reference)</span>
<span class="lg-own"><i class="sw" style="background:#7b1fa2"></i>own error (node computed alone in LOW from
exact inputs, --tune's ranking)</span>
<span class="lg-kept"><i class="sw" style="background:#1d7a35"></i>kept float32 by --tune</span>
<span><i class="sw" style="background:#e8833a;opacity:.4"></i>float32 islands</span></div>
<div id="chart"></div></section>
<section><h2>Nodes</h2>
<div class="controls"><input id="filter" type="search" placeholder="filter: part of a name, op type, rule or reason">
<select id="filter-field"><option value="any">any field</option><option value="name">name</option>
<option value="op">op type (exact)</option><option value="rule">rule</option><option value="reason">reason</option></select>
<select id="filter-prec"><option value="">any precision</option><option>LOW</option><option>HIGH</option>
<option>NONE</option><option>FALLBACK</option></select><select id="table-order"><option value="importance">what matters first: failing,
then float32 heavy ops</option><option value="topo">topological order</option></select>
<span id="table-count"></span></div>
<div class="thead"><div>#</div><div>name</div><div>op type</div><div>precision</div><div>rule</div><div>reason</div></div>
<div class="tscroll" id="tscroll"><div id="tspacer"></div><div id="trows"></div></div>
<div id="row-details" class="note">Click a row for its whole name and reason.</div></section>
</main>
<div id="tip"></div>
"""


def embed_json(data: Dict[str, Any]) -> str:
    """``data`` as compact JSON safe inside a ``<script>`` element.

    Every ``<`` becomes ``\\u003c`` (the same string to a JSON parser), so no
    node name can close the element or open a comment.
    """
    return json.dumps(_finite(data), separators=(",", ":"), ensure_ascii=False, allow_nan=False).replace(
        "<", "\\u003c"
    )


def _finite(value):
    """``value`` with every NaN/Infinity float replaced by None (JSON.parse accepts neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render_page(data: Dict[str, Any]) -> str:
    """The whole page for ``data`` (``ampconv.report.html.columns.page_data``'s result)."""
    source = data["summary"].get("source") or "report"
    return "\n".join((
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No network: nothing may be fetched, not even by a crafted node name.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        f"<title>ampconv report: {html.escape(str(source))}</title>",
        f"<style>{CSS}</style>",
        f"<script>{ERROR_HOOK}</script>",
        "</head><body>",
        _BODY,
        f'<script type="application/json" id="{DATA_ID}">{embed_json(data)}</script>',
        f"<script>{SCRIPT}</script>",
        "</body></html>",
        "",
    ))
