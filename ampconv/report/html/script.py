"""The page's script, inlined into the HTML. Plain ES5-level JavaScript, no library.

``ERROR_HOOK`` runs first (in the head): every uncaught error and every
``console.error`` is written into ``#js-errors``, which a headless browser's
``--dump-dom`` shows to the tests. ``SCRIPT`` reads the embedded data
(``#report-data``) once and draws every part; the strip and the node table
draw only what is visible, so 40,000 nodes cost no more DOM than 40.
When it is done it records ``performance.now()`` in ``body[data-render-ms]``.
"""

ERROR_HOOK = r"""
(function () {
  var seen = [];
  function note(text) {
    seen.push(String(text));
    var box = document.getElementById("js-errors");
    if (box) { box.textContent = seen.join("\n"); box.setAttribute("data-count", String(seen.length)); }
  }
  window.__reportErrors = seen;
  window.addEventListener("error", function (e) { note("error: " + (e.message || e.type)); });
  var original = console.error;
  console.error = function () {
    note("console.error: " + Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
})();
"""

SCRIPT = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var C = D.nodes, T = D.tables, N = C.name.length;
  var PREC = ["LOW", "HIGH", "NONE", "FALLBACK"];
  var COLOR = ["#2f7ed8", "#e8833a", "#b9b9b9", "#14a39a"];
  var castOp = T.ops.indexOf("Cast");
  var selected = -1;
  var listeners = [];

  function $(id) { return document.getElementById(id); }
  // ``text`` into ``box`` one word per unbreakable span (CSS .w): a line breaks between words, never at the
  // hyphen of an option (--keep-fp32) or of a path; a word longer than the line still wraps inside its span.
  function wordsInto(box, text) {
    box.textContent = "";
    String(text).split(/(\s+)/).forEach(function (part) {
      if (!part) return;
      box.appendChild(/\s/.test(part) ? document.createTextNode(part) : el("span", "w", part));
    });
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function bytes(n) {
    if (!n) return "0";
    return n >= 1048576 ? (n / 1048576).toFixed(2) + " MiB" : (n / 1024).toFixed(1) + " KiB";
  }
  function num(x) {
    if (x === null || x === undefined) return "inf/NaN";
    return Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : String(+x.toPrecision(3));
  }
  function describe(i) {
    return {
      name: C.name[i], op: T.ops[C.op[i]], precision: PREC[C.prec[i]], rule: T.rules[C.rule[i]],
      reason: T.reasons[C.reason[i]], graph: T.graphs[C.graph[i]], scope: T.scopes[C.scope[i]]
    };
  }
  function select(i) {
    selected = i;
    for (var k = 0; k < listeners.length; k++) listeners[k](i);
  }

  // ---------------------------------------------------------------- verdict: what the page opens on
  function renderVerdict() {
    var V = D.verdict, box = $("verdict");
    box.className = "verdict v-" + V.kind;
    box.setAttribute("data-kind", V.kind);
    $("verdict-title").textContent = V.title;
    $("verdict-detail").textContent = V.detail;
    wordsInto($("verdict-todo"), V.todo || "");
    if (!V.command) { $("fix-row").style.display = "none"; return; }
    wordsInto($("fix-command"), V.command);
    $("copy-fix").addEventListener("click", function () {
      var done = function () { $("copy-fix").textContent = "Copied"; };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(V.command).then(done, function () { selectFix(); });
      } else { selectFix(); }
    });
  }
  function selectFix() {  // a page opened from a file may not reach the clipboard: select the text for Ctrl-C
    var range = document.createRange();
    range.selectNodeContents($("fix-command"));
    var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
    try { if (document.execCommand("copy")) $("copy-fix").textContent = "Copied"; } catch (e) { /* selected */ }
  }

  // ---------------------------------------------------------------- summary
  function renderSummary() {
    var S = D.summary;
    var level = S.level === S.requested_level ? S.level : S.requested_level + " -> " + S.level;
    wordsInto($("title-sub"), (S.dry_run ? "plan for " : "") + S.source +
      (S.output && !S.dry_run ? " -> " + S.output : "") + " (" + S.dtype + ", level " + level + ", preset " + S.preset + ")");
    var grid = $("facts");
    function fact(key, value, id) {
      var box = el("div", "fact");
      box.appendChild(el("div", "k", key));
      var v = el("div", "v", value);
      if (id) v.id = id;
      box.appendChild(v);
      grid.appendChild(box);
    }
    fact("nodes", S.counts.total, "count-total");
    fact("LOW (" + S.dtype + ")", S.counts.LOW, "count-LOW");
    if (S.fallback_dtype) fact("FALLBACK (" + S.fallback_dtype + ")", S.counts.FALLBACK, "count-FALLBACK");
    fact("HIGH (float32)", S.counts.HIGH, "count-HIGH");
    // A model converted before: its float16 nodes are counted as such, not as "0 LOW".
    if (S.counts.already) fact("already " + S.dtype, S.counts.already, "count-already");
    fact("no float data", S.counts.NONE - (S.counts.already || 0), "count-NONE");
    fact("casts inserted", S.casts.inserted, "casts-inserted");
    fact("casts removed", S.casts.removed, "casts-removed");
    if (S.weights.before) fact("weights", Math.round(100 * S.weights.after / S.weights.before) + " %", "weights-ratio");
    var kv = $("facts-kv");
    function row(k, v) { kv.appendChild(el("div", "k", k)); var d = el("div", "v"); kv.appendChild(d);
                         if (typeof v === "string") d.textContent = v; else d.appendChild(v); return d; }
    row("source", S.source || "");
    if (S.output) row("output", S.output + (S.dry_run ? " (dry run: not written)" : ""));
    row("type, level, preset", S.dtype + ", " + level + ", " + S.preset);
    if (S.policy_sources.length) row("policy", S.policy_sources.join(", "));
    row("casts", S.casts.before + " before, " + S.casts.inserted + " inserted, " + S.casts.removed +
        " removed, " + S.casts.after + " after");
    if (S.weights.before) row("weights", bytes(S.weights.before) + " -> " + bytes(S.weights.after));
    if (S.float32) row("why float32", S.float32.replace(/^float32: /, ""));
    if (S.interface.length) {
      // The main graph's float inputs/outputs and the rule that set each (ampconv/plan/interface.py).
      var shown = S.interface.slice(0, 8).map(function (i) {
        return i.kind + " " + i.name + ": " + (i.precision === "LOW" ? "LOW" : "float32") + " (" + i.rule + ")";
      });
      if (S.interface.length > 8) shown.push("and " + (S.interface.length - 8) + " more");
      row("interface", shown.join("; "));
    }
    if (S.calibration) row("calibration", S.calibration.samples + " sample(s) " +
        (S.calibration.random ? "random (seeded)" : "from files") + ", " + S.calibration.tensors + " tensors observed");
    // How far each float input may grow before a LOW node overflows (ampconv/plan/envelope.py).
    (S.envelope || []).forEach(function (text, i) { row("envelope", text).id = "envelope-" + i; });
    if (S.tune) {
      var t = S.tune;
      row("tune", (t.passed ? "passes" : "could not pass") + " after " + t.evaluations + " evaluation(s) (budget " +
          t.budget + ", " + t.low_nodes + " LOW nodes after the guards), " + (t.kept || []).length + " node(s) kept float32");
    }
    if (S.release) {
      var r = S.release;
      row("release", r.lowered + " of " + r.nodes + " float32 node(s) in " + r.islands + " island(s) lowered on " +
          r.evidence + ", " + r.evaluations + " evaluation(s) (budget " + r.budget + ", " + r.seconds + " s)");
    }
    if (S.validation) {
      var v = S.validation, span = el("span", v.passed ? "pass" : "fail", v.passed ? "PASS" : "FAIL");
      var box = el("span"); box.appendChild(span);
      box.appendChild(document.createTextNode(" (" + (v.backend || "") + ", " + v.samples + " sample(s)); " +
        v.outputs.map(function (o) { return o.name + ": " + (o.passed ? "pass" : "fail") + " (" + o.decided_by + ")"; }).join("; ")));
      row("validation", box);
      var loc = v.localization;
      if (loc && loc.node) row("drift starts at", loc.node + " (" + loc.op_type + "), " + loc.reason + "; " +
                               loc.precision + ": " + loc.rule);
      // The fix is said once, in the verdict above; here only where the precision is lost.
      if (loc && loc.cause) row("cause", loc.cause.node + " (" + loc.cause.op_type + "): own error " + loc.cause.own_error);
    }
    // What may need an action first (warnings), then what was decided, then the long lists, grouped.
    var list = $("messages");
    function msg(cls, text, parent) { var li = el("li", cls, text); (parent || list).appendChild(li); return li; }
    S.warnings.forEach(function (w) { msg("warning", "warning: " + w); });
    S.interface.forEach(function (i) { if (i.rule === "io-misfit") msg("warning", i.kind + " " + i.name + ": " + i.reason); });
    if (S.tune) (S.tune.kept || []).forEach(function (k) { msg("", "tune: " + k.node + " (" + (k.op_type || "?") + ") kept float32: " + k.evidence); });
    if (S.release) {
      (S.release.released || []).forEach(function (i) { msg("", "release: " + i.nodes.join(", ") + " lowered (float32 by " + i.rules.join(", ") + "): " + i.effect); });
      (S.release.kept || []).forEach(function (i) { msg("", "release: " + i.nodes.join(", ") + " kept float32: " + i.error); });
    }
    grouped(S.runtime_pins.map(function (p) { return "onnxruntime pin: " + p.node + " kept float32 (" + p.reason + ")"; }),
            "onnxruntime pins");
    grouped(S.notes.map(function (n) { return "note: " + n; }), "notes");
    grouped(S.constants.map(function (c) { return "constant " + c.tensor + " (used by " + c.consumer + "): " + c.detail + " -> " + c.action; }),
            "constants out of the LOW range or rounded");
    function grouped(lines, what) {  // more than 3 of a kind: the first 2, the rest one click away
      if (lines.length <= 3) { lines.forEach(function (l) { msg("", l); }); return; }
      lines.slice(0, 2).forEach(function (l) { msg("", l); });
      var li = msg("", ""), more = el("details"), inner = el("ul");
      more.appendChild(el("summary", "", "and " + (lines.length - 2) + " more " + what));
      lines.slice(2).forEach(function (l) { msg("", l, inner); });
      more.appendChild(inner); li.appendChild(more);
    }
  }

  // ---------------------------------------------------------------- op table
  function renderOps() {
    var body = $("ops-body"), max = 1;
    D.ops.forEach(function (r) { max = Math.max(max, r.LOW + (r.FALLBACK || 0) + r.HIGH + r.NONE); });
    if (D.summary.fallback_dtype) $("legend-fallback").hidden = false;
    D.ops.forEach(function (r) {
      var tr = el("tr"); tr.setAttribute("data-op", r.op);
      tr.appendChild(el("td", "", r.op));
      tr.appendChild(el("td", "low", r.FALLBACK ? r.LOW + " + " + r.FALLBACK + " " + D.summary.fallback_dtype : r.LOW));
      tr.appendChild(el("td", "high", r.HIGH));
      tr.appendChild(el("td", "none", r.NONE));
      var cell = el("td", "bar"), bar = el("div");
      [["LOW", 0], ["FALLBACK", 3], ["HIGH", 1], ["NONE", 2]].forEach(function (p) {
        var s = el("span"); s.style.width = (150 * (r[p[0]] || 0) / max) + "px"; s.style.background = COLOR[p[1]]; bar.appendChild(s);
      });
      cell.appendChild(bar); tr.appendChild(cell);
      tr.style.cursor = "pointer";
      tr.addEventListener("click", function () { setFilter("op", r.op); });
      body.appendChild(tr);
    });
  }

  // ---------------------------------------------------------------- precision strip
  var CELL = 10, ROW = 12, LABEL = 230, PAD = 6;
  // A scope label keeps its first segment and as many of its last ones as fit: "/model/.../layers.11/attn/".
  function fitLabel(ctx, text, width) {
    function fits(t) { return ctx.measureText(t).width <= width; }
    if (fits(text)) return text;
    var parts = text.split("/");  // "/a/b/c/" -> ["", "a", "b", "c", ""]
    var head = parts.length > 3 ? parts.slice(0, 2).join("/") + "/" : "";
    for (var k = 3; k < parts.length - 1; k++) {  // drop middle segments, keep the distinguishing end
      var cand = head + "\u2026/" + parts.slice(k).join("/");
      if (fits(cand)) return cand;
    }
    while (text.length > 4 && !fits("\u2026" + text)) text = text.slice(1);
    return "\u2026" + text;
  }
  var rows = null;  // {start: Int32Array, end: Int32Array, label: Int32Array, count}
  function layoutStrip(width) {
    var per = Math.max(8, Math.floor((width - LABEL - 8) / CELL));
    var start = [], end = [], label = [];
    var i = 0;
    while (i < N) {
      var j = i + 1;
      while (j < N && C.scope[j] === C.scope[i]) j++;
      for (var a = i; a < j; a += per) { start.push(a); end.push(Math.min(j, a + per)); label.push(a === i ? C.scope[i] : -1); }
      i = j;
    }
    return { start: Int32Array.from(start), end: Int32Array.from(end), label: Int32Array.from(label), count: start.length, per: per };
  }
  function renderStrip() {
    var wrap = $("strip-wrap"), canvas = $("strip"), scroll = $("strip-scroll"), spacer = $("strip-spacer");
    var width = wrap.clientWidth;
    var probe = $("strip").getContext("2d"), widest = 0;
    probe.font = "11px system-ui, sans-serif";
    for (var s = 0; s < T.scopes.length; s++) widest = Math.max(widest, probe.measureText(T.scopes[s] || "(no scope)").width);
    LABEL = Math.max(120, Math.min(Math.ceil(widest) + 14, Math.floor(width * 0.45)));  // whole labels when they fit
    rows = layoutStrip(width);
    var height = Math.min(rows.count * ROW + 2 * PAD, 440);
    wrap.style.height = height + "px";
    spacer.style.height = (rows.count * ROW + 2 * PAD) + "px";
    var ratio = window.devicePixelRatio || 1;
    var cw = scroll.clientWidth || width;
    canvas.width = Math.floor(cw * ratio); canvas.height = Math.floor(height * ratio);
    canvas.style.width = cw + "px"; canvas.style.height = height + "px";
    canvas.setAttribute("data-cells", String(N));
    canvas.setAttribute("data-rows", String(rows.count));
    var ctx = canvas.getContext("2d");
    var cutLabels = 0, drawnAs = {}, distinct = true;
    function draw() {
      cutLabels = 0;
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.clearRect(0, 0, cw, height);
      var top = scroll.scrollTop, first = Math.max(0, Math.floor(top / ROW)), last = Math.min(rows.count, Math.ceil((top + height) / ROW));
      ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
      for (var r = first; r < last; r++) {
        var y = r * ROW - top + PAD;
        if (rows.label[r] >= 0) {
          ctx.fillStyle = "#5f6b76";
          var text = fitLabel(ctx, T.scopes[rows.label[r]] || "(no scope)", LABEL - 10);
          if (text !== (T.scopes[rows.label[r]] || "(no scope)")) cutLabels++;
          if (drawnAs[text] !== undefined && drawnAs[text] !== rows.label[r]) distinct = false;
          drawnAs[text] = rows.label[r];
          ctx.fillText(text, 4, y + CELL / 2 - 1);
          if (r > 0) { ctx.fillStyle = "#dde2e7"; ctx.fillRect(0, y - 2, cw, 1); }
        }
        for (var i = rows.start[r], x = LABEL; i < rows.end[r]; i++, x += CELL) {
          ctx.fillStyle = COLOR[C.prec[i]];
          ctx.fillRect(x, y, CELL - 2, CELL - 2);
          if (C.op[i] === castOp) { ctx.fillStyle = "#111"; ctx.fillRect(x + 2, y + 2, CELL - 6, CELL - 6); }
          if (i === selected) { ctx.strokeStyle = "#111"; ctx.lineWidth = 2; ctx.strokeRect(x - 1, y - 1, CELL, CELL); }
        }
      }
    }
    var pending = false;
    function redraw() { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); } }
    function at(ev) {
      var box = scroll.getBoundingClientRect();
      var r = Math.floor((ev.clientY - box.top + scroll.scrollTop - PAD) / ROW), c = Math.floor((ev.clientX - box.left - LABEL) / CELL);
      if (r < 0 || r >= rows.count || c < 0) return -1;
      var i = rows.start[r] + c;
      return i < rows.end[r] ? i : -1;
    }
    scroll.addEventListener("scroll", redraw);
    canvas.setAttribute("data-label-width", String(LABEL));
    scroll.addEventListener("mousemove", function (ev) { var i = at(ev); if (i >= 0) showTip(ev, i); else hideTip(); });
    scroll.addEventListener("mouseleave", hideTip);
    scroll.addEventListener("click", function (ev) { var i = at(ev); if (i >= 0) { select(i); revealInTable(i); } });
    listeners.push(function (i) {
      for (var r = 0; r < rows.count; r++) {
        if (i >= rows.start[r] && i < rows.end[r]) {
          var y = r * ROW;
          if (y < scroll.scrollTop || y > scroll.scrollTop + height - ROW) scroll.scrollTop = Math.max(0, y - height / 2);
          break;
        }
      }
      redraw();
    });
    draw();
    canvas.setAttribute("data-cut-labels", String(cutLabels));
    canvas.setAttribute("data-labels-distinct", distinct ? "1" : "0");
  }

  // ---------------------------------------------------------------- tooltip and details
  function detailText(i) {
    var d = describe(i);
    var lines = [d.name + "  (" + d.op + ")", d.precision + "  " + d.rule, d.reason];
    if (d.graph !== "main") lines.push("graph: " + d.graph);
    var e = errorsAt(i);
    if (e) lines.push(e);
    return lines.join("\n");
  }
  function showTip(ev, i) {
    var tip = $("tip");
    tip.textContent = ""; detailText(i).split("\n").forEach(function (l, k) { var line = el("div", "", l); if (k === 0) line.style.fontWeight = "600"; tip.appendChild(line); });
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 540) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  }
  function hideTip() { $("tip").style.display = "none"; }
  listeners.push(function (i) {
    var box = $("details"), d = describe(i);
    box.textContent = "";
    [["node", d.name], ["op type", d.op], ["precision", d.precision], ["rule", d.rule], ["reason", d.reason],
     ["graph", d.graph], ["scope", d.scope || "(none)"], ["position", i + " of " + N]].forEach(function (p) {
      var line = el("div"); line.appendChild(el("b", "", p[0] + ": ")); line.appendChild(document.createTextNode(p[1])); box.appendChild(line);
    });
    var e = errorsAt(i);
    if (e) { var line = el("div"); line.appendChild(el("b", "", "error: ")); line.appendChild(document.createTextNode(e)); box.appendChild(line); }
  });

  // ---------------------------------------------------------------- node table
  var filtered = null, TROW = 36;
  function setFilter(field, text) { $("filter-field").value = field; $("filter").value = text; applyFilter(); $("filter").scrollIntoView({block: "nearest"}); }
  function applyFilter() {
    var q = $("filter").value.trim().toLowerCase(), field = $("filter-field").value, prec = $("filter-prec").value;
    var p = prec === "" ? -1 : PREC.indexOf(prec);
    var lowered = {};
    function tableHit(table, idx) {  // each distinct string is lowered and tested once
      var key = table + idx;
      if (!(key in lowered)) lowered[key] = T[table][idx].toLowerCase().indexOf(q) >= 0;
      return lowered[key];
    }
    var out = [], order = $("table-order").value === "topo" ? null : D.order;
    for (var k = 0; k < N; k++) {
      var i = order ? order[k] : k;
      if (p >= 0 && C.prec[i] !== p) continue;
      if (q) {
        var hit = false;
        if (field === "any" || field === "name") hit = C.name[i].toLowerCase().indexOf(q) >= 0;
        if (!hit && field === "op") hit = T.ops[C.op[i]].toLowerCase() === q;
        if (!hit && field === "any") hit = tableHit("ops", C.op[i]) || tableHit("rules", C.rule[i]) || tableHit("reasons", C.reason[i]);
        if (!hit && field === "rule") hit = tableHit("rules", C.rule[i]);
        if (!hit && field === "reason") hit = tableHit("reasons", C.reason[i]);
        if (!hit) continue;
      }
      out.push(i);
    }
    filtered = Int32Array.from(out);
    $("table-count").textContent = filtered.length + " of " + N + " nodes";
    $("table-count").setAttribute("data-shown", String(filtered.length));
    $("tspacer").style.height = (filtered.length * TROW) + "px";
    $("tscroll").scrollTop = 0;
    drawTable();
  }
  function drawTable() {
    var scroll = $("tscroll"), rowsBox = $("trows");
    var first = Math.max(0, Math.floor(scroll.scrollTop / TROW) - 5);
    var last = Math.min(filtered.length, Math.ceil((scroll.scrollTop + scroll.clientHeight) / TROW) + 5);
    rowsBox.textContent = "";
    for (var k = first; k < last; k++) {
      var i = filtered[k], d = describe(i), r = el("div", "trow" + (i === selected ? " sel" : ""));
      r.style.top = (k * TROW) + "px";
      r.setAttribute("data-node", String(i));
      r.appendChild(el("div", "", i));
      var name = el("div", "", d.name); name.title = d.name; r.appendChild(name);
      r.appendChild(el("div", "", d.op));
      r.appendChild(el("div", "p-" + d.precision, d.precision));
      r.appendChild(el("div", "", d.rule));
      var reason = el("div", "", d.reason); reason.title = d.reason; r.appendChild(reason);
      rowsBox.appendChild(r);
    }
  }
  function revealInTable(i) {
    var k = -1;
    for (var j = 0; j < filtered.length; j++) if (filtered[j] === i) { k = j; break; }
    if (k < 0) {
      $("filter").value = ""; $("filter-prec").value = ""; applyFilter();
      for (var m = 0; m < filtered.length; m++) if (filtered[m] === i) { k = m; break; }
    }
    var scroll = $("tscroll");
    var y = k * TROW;
    if (y < scroll.scrollTop || y > scroll.scrollTop + scroll.clientHeight - TROW) scroll.scrollTop = Math.max(0, y - scroll.clientHeight / 2);
    drawTable();
  }
  function renderTable() {
    var timer = null;
    $("filter").addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
    $("filter-field").addEventListener("change", applyFilter);
    $("filter-prec").addEventListener("change", applyFilter);
    $("table-order").addEventListener("change", applyFilter);
    var pending = false;
    $("tscroll").addEventListener("scroll", function () { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; drawTable(); }); } });
    $("trows").addEventListener("click", function (ev) {
      var r = ev.target.closest(".trow");
      if (r) select(+r.getAttribute("data-node"));
    });
    listeners.push(function (i) {
      drawTable();
      var d = describe(i), box = $("row-details");
      box.textContent = "#" + i + "  " + d.name + " (" + d.op + "): " + d.precision + ", " + d.rule + ": " + d.reason;
    });
    applyFilter();
  }

  // ---------------------------------------------------------------- error along depth
  var E = D.errors, errorIndex = null;
  function errorsAt(i) {
    if (!E) return "";
    var parts = [];
    if (errorIndex.prop.has(i)) parts.push("propagated error " + num(errorIndex.prop.get(i)) + " (sample " + E.sample + ")");
    if (errorIndex.own.has(i)) parts.push("own error " + num(errorIndex.own.get(i)));
    return parts.join("; ");
  }
  function renderChart() {
    var box = $("chart");
    if (!E) { box.parentNode.style.display = "none"; return; }
    errorIndex = { prop: new Map(), own: new Map() };
    E.propagated.forEach(function (p) { errorIndex.prop.set(p[0], p[1]); });
    E.own.forEach(function (p) { errorIndex.own.set(p[0], p[1]); });
    var W = Math.max(box.clientWidth, 400), H = 296, L = 56, R = 12, TOP = 14, B = 50, ZERO = H - B + 12;
    var values = E.propagated.concat(E.own).map(function (p) { return p[1]; }).filter(function (v) { return v !== null && v > 0; });
    var lo = values.length ? Math.floor(Math.log10(Math.min.apply(null, values))) : -6;
    var hi = values.length ? Math.ceil(Math.log10(Math.max.apply(null, values))) : 0;
    lo = Math.max(lo, -12); if (hi <= lo) hi = lo + 1;
    function X(i) { return L + (W - L - R) * (N > 1 ? i / (N - 1) : 0.5); }
    // An error of exactly 0 has no place on a log axis: it is drawn in a band of its own below the axis.
    function Y(v) { if (v === null) return TOP; if (v <= 0) return ZERO; var l = Math.log10(v); return TOP + (H - B - TOP) * (hi - Math.min(hi, Math.max(lo, l))) / (hi - lo); }
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("id", "chart-svg");
    svg.setAttribute("data-zero-y", String(ZERO)); svg.setAttribute("data-axis-y", String(H - B));
    function add(tag, attrs, text) {
      var e = document.createElementNS(ns, tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
      return e;
    }
    // float32 islands: runs of HIGH nodes, merged when they land on the same pixel
    var islands = "", runStart = -1;
    for (var i = 0; i <= N; i++) {
      var high = i < N && C.prec[i] === 1;
      if (high && runStart < 0) runStart = i;
      if (!high && runStart >= 0) {
        var x0 = X(runStart) - 1, x1 = Math.max(X(i - 1) + 1, x0 + 2);
        islands += "M" + x0.toFixed(1) + " " + TOP + "H" + x1.toFixed(1) + "V" + (H - B) + "H" + x0.toFixed(1) + "Z";
        runStart = -1;
      }
    }
    add("path", { d: islands, fill: "#e8833a", "fill-opacity": "0.22", id: "chart-islands" });
    for (var d = lo; d <= hi; d++) {
      add("line", { x1: L, x2: W - R, y1: Y(Math.pow(10, d)), y2: Y(Math.pow(10, d)), stroke: "#eef1f4" });
      add("text", { x: L - 6, y: Y(Math.pow(10, d)) + 4, "text-anchor": "end" }, "1e" + d);
    }
    var roundoff = D.summary.unit_roundoff;  // the LOW type's record (ampconv.core.lowtypes)
    if (roundoff && Math.log10(roundoff) >= lo && Math.log10(roundoff) <= hi) {
      add("line", { x1: L, x2: W - R, y1: Y(roundoff), y2: Y(roundoff), stroke: "#8a96a3", "stroke-dasharray": "4 3" });
      add("text", { x: W - R - 4, y: Y(roundoff) - 4, "text-anchor": "end" }, D.summary.dtype + " unit roundoff");
    }
    add("line", { x1: L, x2: L, y1: TOP, y2: H - B, "class": "axis" });
    add("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, "class": "axis" });
    add("text", { x: L - 6, y: ZERO + 4, "text-anchor": "end" }, "0 (exact)");
    add("text", { x: L, y: H - 6 }, "node position in topological order (0 to " + (N - 1) + "); shaded: float32 (HIGH) nodes");
    function mark(i, color, label, dy, id) {
      if (i === null || i === undefined) return;
      add("line", { x1: X(i), x2: X(i), y1: TOP, y2: H - B, stroke: color, "stroke-width": 1.5, "stroke-dasharray": "5 3" });
      // Right of the line, or left of it when the label would run past the plot's right edge.
      var text = add("text", { x: X(i) + 4, y: TOP + 10 + dy, style: "fill:" + color, id: id }, label);
      var width = text.getComputedTextLength ? text.getComputedTextLength() : 0;
      if (X(i) + 4 + width > W - R) { text.setAttribute("x", X(i) - 4); text.setAttribute("text-anchor", "end"); }
      var bbox = text.getBBox ? text.getBBox() : null;  // the tests read whether the whole label is inside
      if (bbox) text.setAttribute("data-inside", bbox.x >= 0 && bbox.x + bbox.width <= W ? "1" : "0");
    }
    box.appendChild(svg);  // in the document first: the labels measure their own width
    mark(E.cause, "#7b1fa2", "cause: " + (E.cause !== null ? C.name[E.cause] : ""), H - B - TOP - 16, "mark-cause");
    mark(E.first, "#b3261e", "drift starts: " + (E.first !== null ? C.name[E.first] : ""), 0, "mark-first");
    if (E.propagated.length) {
      var line = "";
      E.propagated.forEach(function (p, k) { line += (k ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1); });
      add("path", { d: line, fill: "none", stroke: "#2f7ed8", "stroke-width": 1.5, id: "chart-propagated",
                    "data-points": String(E.propagated.length) });
    }
    if (E.own.length) {
      var dots = "";
      E.own.forEach(function (p) { dots += "M" + (X(p[0]) - 2).toFixed(1) + " " + (Y(p[1]) - 2).toFixed(1) + "h4v4h-4Z"; });
      add("path", { d: dots, fill: "#7b1fa2", id: "chart-own", "data-points": String(E.own.length) });
    }
    E.kept.forEach(function (i) { add("path", { d: "M" + X(i) + " " + (H - B) + "l-5 8h10Z", fill: "#1d7a35" }); });
    var cursor = add("line", { x1: -10, x2: -10, y1: TOP, y2: H - B, stroke: "#111", "stroke-width": 1 });
    function nearest(ev) {
      var box2 = svg.getBoundingClientRect();
      var i = Math.round((ev.clientX - box2.left - L) / (W - L - R) * (N - 1));
      return i >= 0 && i < N ? i : -1;
    }
    svg.addEventListener("mousemove", function (ev) { var i = nearest(ev); if (i >= 0) { showTip(ev, i); } else hideTip(); });
    svg.addEventListener("mouseleave", hideTip);
    svg.addEventListener("click", function (ev) { var i = nearest(ev); if (i >= 0) { select(i); revealInTable(i); } });
    listeners.push(function (i) { cursor.setAttribute("x1", X(i)); cursor.setAttribute("x2", X(i)); });
    var legend = $("chart-legend");
    if (!E.propagated.length) legend.querySelector(".lg-prop").style.display = "none";
    if (!E.own.length) legend.querySelector(".lg-own").style.display = "none";
    if (!E.kept.length) legend.querySelector(".lg-kept").style.display = "none";
  }

  renderVerdict();
  renderSummary();
  renderOps();
  renderStrip();
  renderTable();
  renderChart();
  // How long the page took to draw, for bench/bench_html.py: an attribute, not a line the reader sees.
  var ms = performance.now();
  document.body.setAttribute("data-render-ms", ms.toFixed(1));
  var errs = $("js-errors");
  if (!errs.hasAttribute("data-count")) errs.setAttribute("data-count", "0");
  document.body.setAttribute("data-ready", "1");
})();
"""
