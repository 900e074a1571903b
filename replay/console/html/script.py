"""The console pages' one script (``/static/console.js``; the pages' Content Security
Policy allows no other, and no inline script).

It keeps a page live: it listens to ``/api/stream`` (server-sent events, one an
appended event) and, when an event concerns what the page shows (its ``data-watch``:
any task, the task tree shown, runs, schedules), fetches the page's live part again
(``?part=live``) and swaps it in, at most every :data:`MIN_GAP_MS`: the filters, what is
typed in a form and the scroll stay as they are. It zooms the report's timeline, fills
the fork form's position from a bar, mark or history row clicked, and sends the act
forms with ``fetch`` (the CSRF value in a header), saying the outcome in words. Every
value it shows goes in as text (``textContent``), never as HTML of its own making.
"""

from __future__ import annotations

MIN_GAP_MS = 400
"""The least time between two refreshes of a page's live part (news can come in floods)."""

SCRIPT = (
    """
(function () {
  "use strict";
  var body = document.body;
  var watch = body.getAttribute("data-watch") || "";
  var tree = {};
  var refreshes = 0, busy = false, again = false, timer = null, last = 0, zoom = 1;
  var MIN_GAP = __MIN_GAP__;
  var conn = document.getElementById("conn");
  var said = document.getElementById("said");

  function readTree() {
    var holder = document.getElementById("tree-ids") || body;
    var raw = holder.getAttribute("data-tree");
    tree = {};
    if (!raw) { return; }
    try { JSON.parse(raw).forEach(function (id) { tree[id] = true; }); } catch (e) { tree = {}; }
  }
  readTree();

  function concerns(notice) {
    if (watch === "all") { return true; }
    if (watch === "tasks") { return notice.task_id !== null; }
    if (watch === "tree") {
      return tree[notice.task_id] === true || (notice.owner_id && tree[notice.owner_id] === true);
    }
    if (watch === "runs") { return notice.stream.indexOf("run:") === 0; }
    if (watch === "schedules") {
      return notice.stream.indexOf("cron:") === 0 || notice.type === "TaskSubmitted";
    }
    return false;
  }

  function schedule() {
    if (busy) { again = true; return; }
    if (timer !== null) { return; }
    var wait = Math.max(30, last + MIN_GAP - Date.now());
    timer = setTimeout(refresh, wait);
  }

  function liveUrl() {
    var url = new URL(window.location.href);
    url.searchParams.set("part", "live");
    return url.toString();
  }

  function refresh() {
    timer = null;
    var live = document.getElementById("live");
    if (!live) { return; }
    busy = true;
    last = Date.now();
    fetch(liveUrl(), {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var scroller = document.getElementById("tl-scroll");
        var left = scroller ? scroller.scrollLeft : 0;
        live.innerHTML = html;
        readTree();
        applyZoom();
        scroller = document.getElementById("tl-scroll");
        if (scroller) { scroller.scrollLeft = left; }
        refreshes += 1;
        body.setAttribute("data-refreshes", String(refreshes));
      })
      .catch(function () { /* the next news or poll tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; schedule(); }
      });
  }

  if (watch && window.EventSource) {
    var source = new EventSource("/api/stream");
    source.addEventListener("open", function () {
      conn.className = "conn on";
      conn.title = "live updates: on";
    });
    source.addEventListener("error", function () {
      conn.className = "conn off";
      conn.title = "live updates: reconnecting";
    });
    source.addEventListener("appended", function (message) {
      var notice;
      try { notice = JSON.parse(message.data); } catch (e) { return; }
      if (concerns(notice)) { schedule(); }
    });
  }
  var poll = parseFloat(body.getAttribute("data-poll") || "0");
  if (poll > 0) { setInterval(schedule, poll * 1000); }

  function applyZoom() {
    var canvas = document.getElementById("tl-canvas");
    if (canvas) { canvas.style.width = (zoom * 100) + "%"; }
  }

  function say(text, ok, link) {
    said.textContent = text;
    if (link) {
      var a = document.createElement("a");
      a.href = "/tasks/" + encodeURIComponent(link);
      a.textContent = " open " + link;
      said.appendChild(a);
    }
    said.className = "said " + (ok ? "ok" : "bad");
    said.hidden = false;
    clearTimeout(said.timer);
    said.timer = setTimeout(function () { said.hidden = true; }, 12000);
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    var button = target.closest ? target.closest("[data-zoom]") : null;
    if (button) {
      var how = button.getAttribute("data-zoom");
      zoom = how === "in" ? Math.min(zoom * 2, 64) : how === "out" ? Math.max(zoom / 2, 1) : 1;
      applyZoom();
      return;
    }
    var picked = target.closest ? target.closest("#live [data-pos]") : null;
    var at = document.getElementById("fork-at");
    if (picked && at) {
      at.value = picked.getAttribute("data-pos");
      var box = at.closest("details");
      if (box) { box.open = true; }
      document.querySelectorAll(".picked").forEach(function (e) { e.classList.remove("picked"); });
      picked.classList.add("picked");
      say("fork as of position " + at.value + ": give a reason, then Fork", true);
    }
  });

  var csrf = document.querySelector("meta[name=csrf]");
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute || !form.hasAttribute("data-act") || !window.fetch) { return; }
    event.preventDefault();
    // The fields first: a disabled button (the one pressed) is left out of a form's data.
    var fields = new URLSearchParams(new FormData(form, event.submitter || null)).toString();
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(form.action, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
        "X-CSRF-Token": csrf ? csrf.getAttribute("content") : ""
      },
      body: fields
    }).then(function (response) {
      return response.json().then(function (answer) {
        var act = form.getAttribute("data-act");
        var opened = response.ok && (act === "fork" || act === "submit") ? answer.task_id : null;
        say(answer.message || answer.error || ("HTTP " + response.status), response.ok, opened);
        if (response.ok) { schedule(); }
      });
    }).catch(function (error) {
      say("the console did not answer: " + error, false);
    }).then(function () {
      buttons.forEach(function (b) { b.disabled = false; });
    });
  });
  body.setAttribute("data-ready", "1");  // what a test waits for: the page is the script's
})();
"""
).replace("__MIN_GAP__", str(MIN_GAP_MS))
