"""The report page's style and its one script, inlined into every report.

The script only enhances what the HTML already shows: it widens the timeline's canvas
to zoom (every position is a percentage), redraws the axis ticks for the part in view,
filters rows, moves native tooltips into a styled one, and links timeline and explain
trail both ways. It reads nothing but the page: no data is embedded for it, so no
recorded string ever reaches it except through the DOM's own (escaped) attributes.
"""

from __future__ import annotations

import json

from .scale import END_PX, FOLD_CHAR_PX, LABEL_GAP_PX, STEPS, TICK_CHAR_PX, TICK_PX

CSS = """
:root{--bg:#f6f7fb;--card:#fff;--fg:#1c2333;--muted:#697386;--line:#e2e6ef;--soft:#eef1f6;
--run:#3b6fe0;--abort:#8b5cf6;--crash:#d9363e}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,
sans-serif;background:var(--bg);color:var(--fg)}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);
padding:1px 5px;border-radius:4px}
a{color:#2456c7;text-decoration:none}a:hover{text-decoration:underline}
header{background:var(--card);border-bottom:1px solid var(--line);padding:18px 28px 0}
h1{font-size:20px;margin:0 0 10px;display:flex;align-items:center;gap:10px;flex-wrap:wrap}
h1 code{font-size:18px}
h2{font-size:15px;margin:22px 0 10px;display:flex;gap:10px;align-items:baseline}
.muted{color:var(--muted);font-weight:400;font-size:13px}
.meta{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:3px 28px;
margin:0 0 12px;font-size:13px}
.meta div{display:flex;gap:10px}.meta dt{color:var(--muted);min-width:64px}
.meta dd{margin:0;overflow-wrap:anywhere}
nav{display:flex;gap:2px}
nav a{padding:8px 12px;border-bottom:2px solid transparent;color:var(--fg)}
nav a:hover{border-color:var(--run);text-decoration:none}
section{padding:2px 28px 10px}
footer{padding:16px 28px 28px;color:var(--muted);font-size:12px}
.badge{font-size:12px;font-weight:600;padding:2px 10px;border-radius:999px}
.badge.ok{background:#dcf5e4;color:#166534}.badge.bad{background:#fde2e2;color:#9b1c1c}
.note{color:var(--muted);font-size:12.5px;margin:6px 0}
.tag{font-size:10.5px;color:#7a5a00;background:#fff3cd;border-radius:4px;padding:0 5px}
.tools{display:flex;gap:6px;align-items:center;margin:0;flex-wrap:wrap;position:sticky;top:0;
z-index:5;background:var(--bg);padding:8px 28px;border-bottom:1px solid var(--line)}
.count{color:var(--muted);font-size:12px;min-width:120px}
.tools button{font:inherit;border:1px solid var(--line);background:var(--card);
border-radius:6px;min-width:30px;padding:2px 9px;cursor:pointer}
.tools button:hover{background:var(--soft)}
.zoom{color:var(--muted);font-size:12px;min-width:44px}
.tools input{font:inherit;padding:3px 9px;border:1px solid var(--line);border-radius:6px;
min-width:330px}
.hint{color:var(--muted);font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:5px 14px;font-size:12px;color:var(--muted);
margin:0 0 10px}
.key{display:inline-flex;align-items:center;gap:6px}
.tl{display:grid;grid-template-columns:minmax(200px,max-content) minmax(0,1fr);
background:var(--card);border:1px solid var(--line);border-radius:10px;overflow:hidden;
box-shadow:0 1px 2px rgba(16,24,40,.04)}
.tl-names{border-right:1px solid var(--line);background:#fafbfd;min-width:0;max-width:38vw}
.tl-corner{height:var(--axis);display:flex;align-items:center;padding:0 12px;font-size:11px;
color:var(--muted);border-bottom:1px solid var(--line);white-space:nowrap}
.tl-name{height:var(--lane);display:flex;align-items:center;gap:6px;white-space:nowrap;
padding:0 12px 0 calc(12px + var(--depth) * 16px);font-size:12.5px;overflow:hidden}
.tl-name>*{overflow:hidden;text-overflow:ellipsis;flex:0 1 auto;min-width:0}
.tl-name .kind{color:var(--muted);font-size:11.5px}
.tl-name.sub{color:var(--muted);font-size:11.5px;padding-left:calc(28px + var(--depth) * 16px)}
.tl-name.first,.tl-lane.first{box-shadow:inset 0 1px 0 var(--soft)}
.tl-scroll{overflow-x:auto;overflow-y:hidden;min-width:0}
.tl-canvas{position:relative;width:100%;min-width:100%;overflow:hidden}
.tl-axis{height:var(--axis);position:relative;border-bottom:1px solid var(--line)}
.tl-track{position:absolute;top:0;bottom:0;left:10px;right:var(--room)}
.tick{position:absolute;top:0;height:var(--h,2000px);border-left:1px solid var(--soft);
padding-left:4px;font-size:11px;line-height:var(--axis);color:var(--muted);white-space:nowrap}
.tick.end{border-left:0;border-right:1px solid var(--soft);padding:0 4px 0 0;
transform:translateX(-100%)}
.fold{position:absolute;top:0;height:var(--h,2000px);background:repeating-linear-gradient(
135deg,rgba(105,115,134,.10) 0 3px,rgba(105,115,134,.03) 3px 7px);border-left:1px dashed #c3c9d5;
border-right:1px dashed #c3c9d5;z-index:0}
.fold span{display:block;font-size:9.5px;line-height:var(--axis);color:var(--muted);
text-align:center;white-space:nowrap;overflow:hidden}
.tl-lane{height:var(--lane);position:relative}
.tl-lane:hover,.tl-name:hover{background:rgba(59,111,224,.05)}
.bar{position:absolute;top:5px;height:calc(var(--lane) - 10px);min-width:3px;border-radius:4px;
overflow:hidden;color:#fff;font-size:11px;line-height:calc(var(--lane) - 10px);
white-space:nowrap;z-index:1;user-select:none;cursor:pointer}
.bar span{display:block;padding:0 5px;overflow:hidden;text-overflow:ellipsis}
.s-pending{top:10px;height:calc(var(--lane) - 20px);background:repeating-linear-gradient(
135deg,#dfe3eb 0 4px,#cdd3de 4px 8px)}
.s-pending span{display:none}.s-pending.st-parked{background:#2b3140}
.s-running{background:var(--run)}.s-running.st-abort{background:var(--abort)}
.s-running.st-interrupted{background:repeating-linear-gradient(135deg,#d9363e 0 6px,
#ef6b70 6px 12px)}
.s-running.st-stopped{background:#7b8496}
.s-waiting{background:#fdf0c8;border:1px solid #efc25a;color:#7a5200}
.s-sleeping{background:#e5e9ff;border:1px solid #a9b5fb;color:#3a3f9e}
.s-completing{background:#ffe9d5;border:1px solid #f59a4a;color:#9a3a12}
.bar.planned{background:transparent;border:1px dashed #a9b5fb;z-index:0}
.s-turn{background:#12a594}.s-turn.st-active{background:#7fd9cc;color:#0b4f47}
.s-turn.st-failed,.s-turn.st-exited,.s-turn.st-stalled{background:#e5484d}
.s-run{background:#5b6b86}.s-run.st-done{background:#2f9e5a}.s-run.st-failed{background:#d9363e}
.s-run.st-orphaned{background:#a1670e}.s-run.st-superseded{background:#98a2b3}
.s-run.st-dispatching,.s-run.st-running{background:#0ea5e9}
.mark{position:absolute;top:50%;width:11px;height:11px;transform:translate(-50%,-50%);z-index:2}
.m-end{border-radius:50%;border:2px solid #fff;box-shadow:0 0 0 1px rgba(0,0,0,.3);
width:13px;height:13px;background:#7b8496;z-index:1}
.m-end.st-completed{background:#2f9e5a}.m-end.st-failed,.m-end.st-faulted{background:#d9363e}
.m-end.st-orphaned{background:#a1670e}
.m-abort{width:9px;height:9px;background:#e5484d;border:1px solid #fff;
transform:translate(-50%,-50%) rotate(45deg)}
.m-crash,.m-refusal,.m-wakeup,.m-cleanup{background:none}
.m-crash::before,.m-crash::after,.m-refusal::before,.m-refusal::after,.m-wakeup::before,
.m-wakeup::after,.m-cleanup::before,.m-cleanup::after{content:"";position:absolute;
clip-path:var(--shape)}
.m-crash::before,.m-refusal::before,.m-wakeup::before,.m-cleanup::before{inset:-3px;
background:#fff}
.m-crash::after,.m-refusal::after,.m-wakeup::after,.m-cleanup::after{inset:0;background:var(--c)}
.m-crash{width:13px;height:12px;--c:#7a0d12;--shape:polygon(50% 0,100% 100%,0 100%)}
.m-parked{width:10px;height:10px;background:#1c2333;border:1px solid #fff}
.m-retry{width:10px;height:10px;border-radius:50%;border:2.5px solid #2f9e5a;background:#fff}
.m-refusal{width:12px;height:12px;--c:#f07c19;--shape:polygon(20% 0,50% 30%,80% 0,100% 20%,
70% 50%,100% 80%,80% 100%,50% 70%,20% 100%,0 80%,30% 50%,0 20%)}
.m-wakeup{width:11px;height:10px;--c:#0b8fd6;--shape:polygon(0 0,100% 0,50% 100%)}
.m-cleanup{width:10px;height:9px;--c:#7b8496;--shape:polygon(50% 0,100% 100%,0 100%)}
.m-note{width:3px;height:14px;background:#98a2b3;border-radius:1px}
.m-pass{width:9px;height:9px;background:#a855f7;border-radius:2px}
.m-stop{width:9px;height:9px;background:#7b8496}
.note-by{position:absolute;top:50%;transform:translate(9px,-50%);font-size:10.5px;
line-height:14px;white-space:nowrap;max-width:var(--room);overflow:hidden;
text-overflow:ellipsis;padding:0 4px;border-radius:3px;background:rgba(255,255,255,.9);
color:#41495a;z-index:2;pointer-events:none}
.note-by.st-failed,.note-by.st-faulted{color:#b42318}.note-by.st-completed{color:#1f7a44}
.note-by.st-orphaned{color:#a1670e}.note-by.crowded{display:none}
.bar:hover,.mark:hover,.hl{outline:2px solid #1c2333;outline-offset:1px;z-index:3}
.note-by.hl{outline:0}
.sample{position:relative;display:inline-block;top:auto;left:auto;transform:none}
.bar.sample{width:22px;height:10px;top:auto}.m-abort.sample{transform:rotate(45deg)}
.tl-arrows{position:absolute;left:10px;top:0;width:calc(100% - 10px - var(--room));
pointer-events:none;
overflow:visible;z-index:1}
.tl-arrows line{stroke:#c58a00;stroke-width:1.3;opacity:.6}
.tl-arrows line.p-failFast{stroke:#d9363e;stroke-dasharray:4 3}
.tl-arrows marker path{fill:#b07800}
table{border-collapse:separate;border-spacing:0;width:100%;background:var(--card);
border:1px solid var(--line);border-radius:10px;overflow:hidden;font-size:13px}
th,td{padding:6px 10px;border-bottom:1px solid var(--soft);text-align:left;vertical-align:top}
tbody tr:last-child td{border-bottom:0}
th{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted);
background:#fafbfd;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.tree td.name{padding-left:calc(10px + var(--depth) * 18px);white-space:nowrap}
tr.chosen td{background:#eef4ff}tr.hl td{background:#fff7d1}
.why{color:var(--muted)}
.o-completed{color:#1f7a44;font-weight:600}.o-failed,.o-faulted{color:#b42318;font-weight:600}
.o-aborted{color:#5b6474;font-weight:600}.o-orphaned{color:#a1670e;font-weight:600}
.explain td:last-child{overflow-wrap:anywhere}
.explain td:nth-child(2),.explain td:nth-child(3),.explain td:nth-child(5){white-space:nowrap}
.hide{display:none!important}
#tip{position:fixed;z-index:10;max-width:460px;background:#1c2333;color:#f4f6fa;font-size:12px;
line-height:1.45;padding:8px 10px;border-radius:7px;white-space:pre-wrap;pointer-events:none;
box-shadow:0 6px 18px rgba(16,24,40,.25);overflow-wrap:anywhere}
#tip b{display:block;margin-bottom:2px}
"""

SCRIPT = """
(function () {
  "use strict";
  var tip = document.createElement("div");
  tip.id = "tip";
  tip.hidden = true;
  document.body.appendChild(tip);
  document.querySelectorAll("#tl [title], .explain [title]").forEach(function (el) {
    if (el.tagName.toLowerCase() === "line") { return; }
    el.setAttribute("data-tip", el.getAttribute("title"));
    el.removeAttribute("title");
  });
  function place(event) {
    var x = event.clientX + 14, y = event.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) { x = Math.max(8, event.clientX - w - 14); }
    if (y + h > window.innerHeight - 8) { y = Math.max(8, event.clientY - h - 14); }
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  document.addEventListener("mouseover", function (event) {
    var el = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!el) { tip.hidden = true; return; }
    var lines = el.getAttribute("data-tip").split("\\n");
    tip.textContent = "";
    var head = document.createElement("b");
    head.textContent = lines.shift();
    tip.appendChild(head);
    tip.appendChild(document.createTextNode(lines.join("\\n")));
    tip.hidden = false;
    place(event);
  });
  document.addEventListener("mousemove", function (event) {
    if (!tip.hidden) { place(event); }
  });

  var canvas = document.getElementById("tl-canvas");
  if (!canvas) { return; }
  var scroll = document.getElementById("tl-scroll");
  var axis = document.getElementById("tl-axis");
  var level = document.getElementById("zoom-level");
  document.getElementById("tools").hidden = false;
  var knots = JSON.parse(canvas.getAttribute("data-knots"));
  var folds = JSON.parse(canvas.getAttribute("data-folds"));
  var start = knots[0][0];
  var zoom = 1;
  var STEPS = __STEPS__, TICK_PX = __TICK_PX__, TICK_CHAR_PX = __TICK_CHAR_PX__;
  var FOLD_CHAR_PX = __FOLD_CHAR_PX__, LABEL_GAP_PX = __LABEL_GAP_PX__, END_PX = __END_PX__;

  function duration(ms) {
    ms = Math.abs(ms);
    if (ms < 1000) { return ms ? +ms.toPrecision(3) + " ms" : "0 ms"; }
    if (ms < 60000) { return +(ms / 1000).toPrecision(3) + " s"; }
    var p = ms < 3600000 ? [Math.round(ms / 1000), 60, "min", "s"]
      : ms < 86400000 ? [Math.round(ms / 60000), 60, "h", "min"]
      : [Math.round(ms / 3600000), 24, "d", "h"];
    var whole = Math.floor(p[0] / p[1]), rest = p[0] % p[1];
    return whole + " " + p[2] + (rest ? " " + rest + " " + p[3] : "");
  }
  function niceStep(raw) {
    var i;
    raw = Math.max(raw, 0.001);
    if (raw < 1) {
      var power = Math.pow(10, Math.floor(Math.log10(raw)));
      var factors = [1, 2, 5, 10];
      for (i = 0; i < factors.length; i++) {
        if (raw <= factors[i] * power) { return factors[i] * power; }
      }
    }
    for (i = 0; i < STEPS.length; i++) {
      if (raw <= STEPS[i]) { return STEPS[i]; }
    }
    return 604800000 * Math.ceil(raw / 604800000);
  }
  function folded(a, b) {
    for (var i = 0; i < folds.length; i++) {
      if (folds[i][0] === a && folds[i][1] === b) { return true; }
    }
    return false;
  }
  function mark(className, x, label, tipText) {
    var el = document.createElement("span");
    var room = (100 - x) / 100 * (axis.offsetWidth || 1);
    el.className = className + (className === "tick" && room < END_PX ? " end" : "");
    el.style.left = x + "%";
    el.textContent = label;
    el.setAttribute("data-tip", tipText);
    axis.appendChild(el);
    return el;
  }
  function ticks() {
    // Labels left to right; one that would touch the one before is left out (a fold
    // keeps its band and tooltip), as scale.py's Scale.axis lays out the page's own.
    var width = axis.offsetWidth || 1;
    var from = (scroll.scrollLeft - axis.offsetLeft) / width * 100 - 5;
    var to = (scroll.scrollLeft + scroll.clientWidth - axis.offsetLeft) / width * 100 + 5;
    var free = -Infinity;
    axis.textContent = "";
    for (var i = 0; i + 1 < knots.length; i++) {
      var t0 = knots[i][0], x0 = knots[i][1], t1 = knots[i + 1][0], x1 = knots[i + 1][1];
      if (t1 <= t0 || x1 < from || x0 > to) { continue; }
      if (folded(t0, t1)) {
        var band = mark("fold", x0, "", duration(t1 - t0) + " with nothing happening: folded");
        band.style.width = (x1 - x0) + "%";
        var said = duration(t1 - t0);
        var left = x0 / 100 * width, right = x1 / 100 * width;
        if (right - left >= said.length * FOLD_CHAR_PX + 6 && left >= free) {
          var words = document.createElement("span");
          words.textContent = said;
          band.appendChild(words);
          free = right + LABEL_GAP_PX;
        }
        continue;
      }
      var step = niceStep((t1 - t0) / Math.max((x1 - x0) / 100 * width / TICK_PX, 1e-9));
      var a = t0 + (Math.max(from, x0) - x0) / (x1 - x0) * (t1 - t0);
      var b = t0 + (Math.min(to, x1) - x0) / (x1 - x0) * (t1 - t0);
      for (var k = Math.ceil((a - start) / step - 1e-9); start + k * step <= b + 1e-9; k++) {
        var at = start + k * step;
        var x = x0 + (x1 - x0) * (at - t0) / (t1 - t0);
        var label = k === 0 ? "0" : "+" + duration(at - start);
        var px = x / 100 * width, wide = 4 + label.length * TICK_CHAR_PX;
        var end = (100 - x) / 100 * width < END_PX;
        if ((end ? px - wide : px) < free) { continue; }
        mark("tick", x, label, new Date(at).toISOString());
        free = (end ? px : px + wide) + LABEL_GAP_PX;
      }
    }
    canvas.style.setProperty("--h", canvas.offsetHeight + "px");
  }
  function crowd() {
    // A note beside a mark or bar end is left out (its tooltip still says it) where it
    // would cover the note before it or another mark of its lane.
    canvas.querySelectorAll(".tl-lane:not(.hide) .tl-track").forEach(function (track) {
      var notes = track.querySelectorAll(".note-by");
      if (!notes.length) { return; }
      var marks = [];
      track.querySelectorAll(".mark").forEach(function (m) {
        var r = m.getBoundingClientRect();
        marks.push([r.left + r.width / 2, m.getAttribute("data-pos")]);
      });
      var right = -Infinity;
      notes.forEach(function (note) {
        note.classList.remove("crowded");
        var r = note.getBoundingClientRect();
        var covers = r.left < right + 4 || marks.some(function (m) {
          return m[0] > r.left && m[0] < r.right && m[1] !== note.getAttribute("data-pos");
        });
        if (covers) { note.classList.add("crowded"); } else { right = r.right; }
      });
    });
  }
  function setZoom(next, anchor) {
    next = Math.min(Math.max(next, 1), 5000);
    var offset = anchor === undefined ? scroll.clientWidth / 2 : anchor;
    var at = (scroll.scrollLeft + offset) / (canvas.offsetWidth || 1);
    zoom = next;
    canvas.style.width = (zoom * 100) + "%";
    scroll.scrollLeft = at * canvas.offsetWidth - offset;
    level.textContent = (zoom < 10 ? zoom.toFixed(1) : Math.round(zoom)) + "\u00d7";
    ticks();
    crowd();
  }
  function lane(row) {
    return canvas.querySelector('.tl-lane.first[data-row="' + row + '"]');
  }
  function arrows() {
    canvas.style.height = "";
    canvas.querySelectorAll(".tl-arrows line").forEach(function (line) {
      var a = lane(line.getAttribute("data-from"));
      var b = lane(line.getAttribute("data-to"));
      if (!a || !b || a.classList.contains("hide") || b.classList.contains("hide")) {
        line.classList.add("hide");
        return;
      }
      line.classList.remove("hide");
      line.setAttribute("y1", a.offsetTop + a.offsetHeight / 2);
      line.setAttribute("y2", b.offsetTop + b.offsetHeight / 2);
    });
    var svg = canvas.querySelector(".tl-arrows");
    if (svg) { svg.setAttribute("height", canvas.offsetHeight); }
    ticks();
    crowd();
  }
  document.getElementById("tools").addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) { return; }
    var how = button.getAttribute("data-zoom");
    if (how === "in") { setZoom(zoom * 2); }
    else if (how === "out") { setZoom(zoom / 2); }
    else { setZoom(1); }
  });
  scroll.addEventListener("wheel", function (event) {
    if (!event.ctrlKey && !event.metaKey) { return; }
    event.preventDefault();
    var box = scroll.getBoundingClientRect();
    setZoom(zoom * Math.exp(-event.deltaY * 0.002), event.clientX - box.left);
  }, { passive: false });
  var pending = false;
  scroll.addEventListener("scroll", function () {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; ticks(); });
  });
  canvas.addEventListener("dblclick", function (event) {
    var bar = event.target.closest(".bar");
    if (!bar) { return; }
    var left = parseFloat(bar.style.left), width = Math.max(parseFloat(bar.style.width), 0.01);
    setZoom(60 / width);
    scroll.scrollLeft = axis.offsetLeft + (left + width / 2) / 100 * axis.offsetWidth
      - scroll.clientWidth / 2;
    ticks();
  });
  function highlight(pos, on) {
    document.querySelectorAll('[data-pos="' + pos + '"]').forEach(function (el) {
      el.classList.toggle("hl", on);
    });
  }
  canvas.addEventListener("click", function (event) {
    var item = event.target.closest("[data-pos]");
    var step = item && document.getElementById("p" + item.getAttribute("data-pos"));
    if (!step) { return; }
    step.scrollIntoView({ block: "center", behavior: "smooth" });
    highlight(item.getAttribute("data-pos"), true);
    window.setTimeout(function () { highlight(item.getAttribute("data-pos"), false); }, 1600);
  });
  document.querySelectorAll(".explain tr[data-pos]").forEach(function (row) {
    var pos = row.getAttribute("data-pos");
    row.addEventListener("mouseenter", function () { highlight(pos, true); });
    row.addEventListener("mouseleave", function () { highlight(pos, false); });
  });
  var count = document.getElementById("filter-count");
  function filter() {
    // Every word typed must be found in a task's words (id, kind, status, outcome,
    // blocked reason, phase, error or reason); the timeline and the owner tree follow.
    var words = document.getElementById("filter").value.trim().toLowerCase().split(/\\s+/);
    var shown = 0, all = 0;
    document.querySelectorAll("[data-search]").forEach(function (el) {
      var said = el.getAttribute("data-search");
      var hit = words.every(function (w) { return said.indexOf(w) >= 0; });
      el.classList.toggle("hide", !hit);
      if (el.tagName.toLowerCase() === "tr") { all += 1; shown += hit ? 1 : 0; }
    });
    count.textContent = shown === all ? all + " tasks" : shown + " of " + all + " tasks match";
    arrows();
  }
  document.getElementById("filter").addEventListener("input", filter);
  window.addEventListener("resize", function () { ticks(); crowd(); });
  filter();
})();
"""

for _name, _value in {
    "__STEPS__": json.dumps(sorted(STEPS)),
    "__TICK_PX__": TICK_PX,
    "__TICK_CHAR_PX__": TICK_CHAR_PX,
    "__FOLD_CHAR_PX__": FOLD_CHAR_PX,
    "__LABEL_GAP_PX__": LABEL_GAP_PX,
    "__END_PX__": END_PX,
}.items():
    SCRIPT = SCRIPT.replace(_name, str(_value))

__all__ = ["CSS", "SCRIPT"]
