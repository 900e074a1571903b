"""The report page's one script (inlined by :mod:`.assets`; the page's Content Security
Policy allows it by its hash). It widens the timeline's canvas to zoom, lays out the
axis for the part in view, filters rows, moves native tooltips into a styled one, hides
notes that would cover one another, and links timeline and explain trail both ways."""

from __future__ import annotations

import json

from .scale import END_PX, FOLD_CHAR_PX, LABEL_GAP_PX, STEPS, TICK_CHAR_PX, TICK_PX

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
    // would cover the note before it or another mark of its lane. All boxes are read
    // first and the classes set after, so the page is laid out once, not once a note.
    var notes = canvas.querySelectorAll(".note-by");
    notes.forEach(function (note) { note.classList.remove("crowded"); });
    var crowded = [];
    canvas.querySelectorAll(".tl-lane:not(.hide) .tl-track").forEach(function (track) {
      var mine = track.querySelectorAll(".note-by");
      if (!mine.length) { return; }
      var marks = [];
      track.querySelectorAll(".mark").forEach(function (m) {
        var r = m.getBoundingClientRect();
        marks.push([r.left + r.width / 2, m.getAttribute("data-pos")]);
      });
      var right = -Infinity;
      mine.forEach(function (note) {
        var r = note.getBoundingClientRect();
        var covers = r.left < right + 4 || marks.some(function (m) {
          return m[0] > r.left && m[0] < r.right && m[1] !== note.getAttribute("data-pos");
        });
        if (covers) { crowded.push(note); } else { right = r.right; }
      });
    });
    crowded.forEach(function (note) { note.classList.add("crowded"); });
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
  function arrows() {
    // Where each row's first lane is, read once for every arrow (then written), so a
    // page of thousands of rows is laid out once.
    canvas.style.height = "";
    var middle = {};
    canvas.querySelectorAll(".tl-lane.first").forEach(function (lane) {
      if (!lane.classList.contains("hide")) {
        middle[lane.getAttribute("data-row")] = lane.offsetTop + lane.offsetHeight / 2;
      }
    });
    var height = canvas.offsetHeight;
    canvas.querySelectorAll(".tl-arrows line").forEach(function (line) {
      var y1 = middle[line.getAttribute("data-from")];
      var y2 = middle[line.getAttribute("data-to")];
      if (y1 === undefined || y2 === undefined) {
        line.classList.add("hide");
        return;
      }
      line.classList.remove("hide");
      line.setAttribute("y1", y1);
      line.setAttribute("y2", y2);
    });
    var svg = canvas.querySelector(".tl-arrows");
    if (svg) { svg.setAttribute("height", height); }
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
    count.textContent = shown === all ? all + (all === 1 ? " task" : " tasks")
      : shown + " of " + all + (all === 1 ? " task matches" : " tasks match");
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

__all__ = ["SCRIPT"]
