"""The page's CSS, inlined into the HTML (the page loads nothing from anywhere)."""

CSS = """
:root { --low: #2f7ed8; --high: #e8833a; --none: #b9b9b9; --fallback: #14a39a; --ink: #1d232a; --muted: #5f6b76; --line: #dde2e7; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0; background: #f6f7f9; }
header { background: #1d232a; color: #fff; padding: 14px 24px; }
header h1 { font-size: 18px; margin: 0; font-weight: 600; }
/* A long path breaks where it must, a word ("level") never: overflow-wrap only, no break inside every word. */
header .sub { color: #c6ced6; font-size: 13px; overflow-wrap: anywhere; }
main { padding: 16px 24px 40px; max-width: 1500px; margin: 0 auto; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 16px; margin-bottom: 16px; }
h2 { font-size: 15px; margin: 0 0 10px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.fact { border: 1px solid var(--line); border-radius: 5px; padding: 8px 10px; }
.fact .k { color: var(--muted); font-size: 12px; }
.fact .v { font-size: 20px; font-weight: 600; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin-top: 10px; font-size: 13px; }
.kv .k { color: var(--muted); }
.msgs { margin: 8px 0 0; padding-left: 18px; font-size: 13px; }
.msgs li.warning { color: #9b2c00; }
.pass { color: #1d7a35; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
table.ops { border-collapse: collapse; font-size: 13px; }
table.ops th, table.ops td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: right; }
table.ops th:first-child, table.ops td:first-child { text-align: left; }
table.ops .bar { width: 160px; } .bar div { height: 10px; display: flex; }
.bar span { display: block; height: 10px; }
.legend { display: flex; gap: 16px; flex-wrap: wrap; font-size: 12px; color: var(--muted); margin-bottom: 8px; }
.sw { display: inline-block; width: 11px; height: 11px; vertical-align: -1px; margin-right: 4px; border-radius: 2px; }
.strip-wrap { position: relative; border: 1px solid var(--line); border-radius: 4px; }
.strip-wrap canvas { position: absolute; left: 0; top: 0; pointer-events: none; }
.strip-scroll { position: absolute; inset: 0; overflow-y: auto; }
#tip { position: fixed; pointer-events: none; background: #1d232a; color: #fff; font-size: 12px; padding: 6px 8px;
       border-radius: 4px; max-width: 520px; display: none; z-index: 10; word-break: break-word; }
#details { font-size: 13px; min-height: 22px; margin-top: 10px; word-break: break-word; }
#details b { font-weight: 600; }
.controls { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 8px; align-items: center; }
.controls input { flex: 1; min-width: 220px; padding: 5px 8px; border: 1px solid #c5ccd3; border-radius: 4px; }
.controls select { padding: 4px; border: 1px solid #c5ccd3; border-radius: 4px; }
#table-count { color: var(--muted); font-size: 12px; }
.thead, .trow { display: grid; grid-template-columns: 56px minmax(200px, 2.4fr) 130px 64px 150px minmax(240px, 3.4fr);
                gap: 8px; padding: 0 8px; font-size: 12.5px; align-items: center; }
.thead { font-weight: 600; border-bottom: 2px solid var(--line); height: 26px; }
.tscroll { position: relative; height: 460px; overflow-y: auto; }
.trow { position: absolute; left: 0; right: 0; height: 36px; border-bottom: 1px solid #eef1f4; cursor: pointer; }
.trow:hover { background: #f1f6fd; } .trow.sel { background: #fff3c4; }
/* Two lines per cell, broken anywhere in a long name: the rest is in the row's details below the table. */
.trow div { overflow: hidden; display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical;
            overflow-wrap: anywhere; line-height: 16px; }
#row-details { word-break: break-word; }
.verdict { border-left: 8px solid #8a96a3; }
.verdict.v-fail { border-left-color: #b3261e; background: #fdeceb; }
.verdict.v-pass { border-left-color: #1d7a35; background: #e9f6ec; }
.verdict.v-unvalidated, .verdict.v-plan { border-left-color: #2f7ed8; background: #eaf2fc; }
.v-title { font-size: 20px; font-weight: 700; }
.v-fail .v-title { color: #b3261e; } .v-pass .v-title { color: #1d7a35; }
.v-detail, .v-todo { margin-top: 6px; overflow-wrap: anywhere; }
.v-todo { font-weight: 600; }
/* One word of the header, the advice or the command (wordsInto): lines break between words, a word that
   fits a line is never split (not at the hyphen of --keep-fp32 either); a longer one wraps inside. */
.w { display: inline-block; max-width: 100%; overflow-wrap: anywhere; }
.fix-row { display: flex; gap: 8px; align-items: flex-start; margin-top: 6px; }
.fix-row pre { flex: 1; margin: 0; padding: 8px 10px; background: #1d232a; color: #fff; border-radius: 4px;
               white-space: pre-wrap; overflow-wrap: anywhere; font-size: 13px; }
.fix-row button { padding: 6px 12px; border: 1px solid #c5ccd3; border-radius: 4px; background: #fff; cursor: pointer; }
.msgs details summary { cursor: pointer; }
.p-LOW { color: var(--low); font-weight: 600; } .p-HIGH { color: var(--high); font-weight: 600; } .p-FALLBACK { color: var(--fallback); font-weight: 600; }
.p-NONE { color: #888; }
#chart svg { display: block; }
#chart .axis { stroke: #9aa4ad; stroke-width: 1; }
#chart text { font-size: 11px; fill: var(--muted); }
.note { color: var(--muted); font-size: 12px; margin: 6px 0 0; }
#js-errors { display: none; }
"""
