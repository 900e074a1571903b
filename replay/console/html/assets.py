"""The console's style sheet (``/static/console.css``): the report's own, for the
timeline and the tables the pages share with it, and the console's bar, forms and
badges after it."""

from __future__ import annotations

from ...report.assets import CSS as REPORT_CSS
from .script import SCRIPT

CONSOLE_CSS = """
body{min-height:100vh}
.topbar{display:flex;align-items:center;gap:18px;background:#1c2333;color:#e8ecf4;
padding:0 22px;height:48px;position:sticky;top:0;z-index:20}
.brand{color:#fff;font-weight:700;font-size:15px;letter-spacing:.01em}
.brand span{color:#9fb4ff;font-weight:500}
.brand:hover{text-decoration:none}
nav.main{display:flex;gap:2px}
nav.main a{color:#c9d2e3;padding:14px 11px;border-bottom:2px solid transparent}
nav.main a.on,nav.main a:hover{color:#fff;border-color:#7c9bff;text-decoration:none}
.store{color:#8d97ab;font-size:12px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;
max-width:30vw;margin-left:auto}
.conn{font-size:11.5px;padding:2px 9px;border-radius:999px;background:#394256;color:#aab3c5}
.conn::before{content:"";display:inline-block;width:7px;height:7px;border-radius:50%;
margin-right:6px;background:#7b8496;vertical-align:1px}
.conn.on{background:#16351f;color:#9be3b0}.conn.on::before{background:#39d06a}
.who{color:#c9d2e3;font-size:12.5px;display:flex;gap:6px;align-items:center;margin:0}
a.who{color:#9fb4ff}
button.link{background:none;border:0;color:#9fb4ff;cursor:pointer;font:inherit;padding:0}
main{padding:18px 26px 40px;max-width:1600px}
main h1{font-size:19px;margin:4px 0 14px}
.task-title code{font-size:17px}
section.card{padding:0;margin:0 0 16px}
section{padding:0;margin:0 0 16px}
h2 .zoom-tools{margin-left:auto;display:flex;gap:4px}
h2 .zoom-tools button{font:inherit;font-size:12px;border:1px solid var(--line);
background:var(--card);border-radius:6px;padding:1px 9px;cursor:pointer}
.filters{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:0 0 12px}
.filters input,.filters select,.act input,.login input{font:inherit;padding:5px 9px;
border:1px solid #cfd5e1;border-radius:6px;background:#fff}
.filters input[type=search]{min-width:300px;flex:1 1 300px;max-width:520px}
.filters button,.act button,.login button{font:inherit;padding:5px 14px;border-radius:6px;
border:1px solid #2456c7;background:#2f66e0;color:#fff;cursor:pointer}
.filters button:hover,.act button:hover{background:#2456c7}
.reset{font-size:12.5px}
.count{color:var(--muted);font-size:12.5px;margin:0 0 6px;min-width:0}
table.tasks td.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:12.5px;white-space:nowrap;max-width:360px;overflow:hidden;text-overflow:ellipsis}
table.tasks td{white-space:nowrap}
table.tasks td.err,.err{white-space:normal;color:#7a271a;max-width:420px;
overflow-wrap:anywhere}
td.empty,p.empty{color:var(--muted);text-align:center;padding:24px}
.pager{display:flex;gap:14px;align-items:center;margin:10px 0;font-size:13px}
.pager .at{color:var(--muted)}
.st{font-size:11.5px;font-weight:600;padding:1px 8px;border-radius:999px;background:#eef1f6;
color:#41495a;white-space:nowrap}
.st-running,.st-dispatching{background:#dbe6ff;color:#1f4bb8}
.st-pending{background:#eef1f6;color:#41495a}
.st-waiting{background:#fdf0c8;color:#7a5200}.st-sleeping{background:#e5e9ff;color:#3a3f9e}
.st-completing{background:#ffe9d5;color:#9a3a12}
.st-completed,.st-done{background:#dcf5e4;color:#166534}
.st-failed,.st-faulted,.st-orphaned{background:#fde2e2;color:#9b1c1c}
.st-aborted,.st-superseded{background:#e9e9ef;color:#4b5161}
dl.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:4px 26px;
background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px;
margin:0;font-size:13px}
dl.facts div{display:flex;gap:10px;min-width:0}
dl.facts dt{color:var(--muted);min-width:96px}
dl.facts dd{margin:0;overflow-wrap:anywhere;min-width:0}
table.kv code,dl.facts code{white-space:pre-wrap;overflow-wrap:anywhere;background:none;
padding:0}
table.history td:nth-child(2),table.history td:nth-child(3),table.history td:nth-child(5){
white-space:nowrap}
table.history tr[data-pos],table.kv tr[data-pos]{cursor:pointer}
tr.picked td{background:#fff4c2}.bar.picked,.mark.picked{outline:3px solid #f59e0b}
.acts{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:6px 16px 12px;margin:0 0 16px}
.acts summary{cursor:pointer;font-weight:600;padding:8px 0}
form.act{display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center;padding:7px 0;
border-top:1px solid var(--soft);margin:0}
form.act label{font-size:12.5px;color:var(--muted);display:flex;gap:6px;align-items:center}
form.act label.wide{flex:1 1 280px}form.act label.wide input{flex:1}
form.act .hint{font-size:12px;color:var(--muted)}
details.act-box{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:8px 16px;margin:16px 0}
details.act-box summary{cursor:pointer;font-weight:600}
#said{position:fixed;right:22px;bottom:22px;max-width:560px;padding:10px 14px;
border-radius:8px;font-size:13px;box-shadow:0 6px 18px rgba(16,24,40,.25);z-index:30;
overflow-wrap:anywhere}
#said.ok{background:#16351f;color:#d7f5df}#said.bad{background:#5c1016;color:#ffe1e3}
#said a{color:#fff;margin-left:6px}
p.warn{background:#fff7d1;border:1px solid #f1d27a;border-radius:8px;padding:8px 12px;
font-size:13px}
p.error{background:#fde2e2;border:1px solid #f3a9a9;border-radius:8px;padding:8px 12px;
font-size:13px;color:#7a1010}
pre.stream{white-space:pre-wrap;overflow-wrap:anywhere;background:#0f1420;color:#e6edf3;
padding:12px 14px;border-radius:8px;max-height:420px;overflow:auto;font-size:12.5px}
.login{max-width:460px;background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:18px 20px}
.login label{display:flex;flex-direction:column;gap:6px;font-size:13px;color:var(--muted)}
.login button{margin-top:12px}
"""

CSS = REPORT_CSS + CONSOLE_CSS
"""The whole style sheet: the report's, then the console's."""

__all__ = ["CSS", "SCRIPT"]
