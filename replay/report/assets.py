"""The report page's style and its one script, inlined into every report.

The script only enhances what the HTML already shows: it widens the timeline's canvas
to zoom (every position is a percentage), redraws the axis ticks for the part in view,
filters rows, moves native tooltips into a styled one, and links timeline and explain
trail both ways. It reads nothing but the page: no data is embedded for it, so no
recorded string ever reaches it except through the DOM's own (escaped) attributes.
"""

from __future__ import annotations

from .script import SCRIPT

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
.explain td:nth-child(2),.explain td:nth-child(3),.explain td:nth-child(4),
.explain td:nth-child(5){white-space:nowrap}
.hide{display:none!important}
#tip{position:fixed;z-index:10;max-width:460px;background:#1c2333;color:#f4f6fa;font-size:12px;
line-height:1.45;padding:8px 10px;border-radius:7px;white-space:pre-wrap;pointer-events:none;
box-shadow:0 6px 18px rgba(16,24,40,.25);overflow-wrap:anywhere}
#tip b{display:block;margin-bottom:2px}
"""

__all__ = ["CSS", "SCRIPT"]
