"""``tasktrail serve``'s JSON API and pages without a browser (issue 46): the list's
filters, search and pages; a task and its history with the rule, actor and reason behind
each event; the acts behind a token (401 without one, the token's actor recorded, never
the body's; a refusal named with its rule; a cookie that needs its CSRF value and the
console's own origin), each appending nothing when refused; the news as server-sent
events; every recorded string escaped on the pages."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.console_server import (
    ALICE,
    Events,
    head,
    in_process,
    small_store,
    token_file,
)

from tasktrail.domain import Scheduler
from tasktrail.replay import replay

BEARER = {"Authorization": f"Bearer {ALICE}"}


def ids(page: dict[str, object]) -> list[str]:
    return [task["id"] for task in page["tasks"]]  # type: ignore[index, attr-defined]


def test_the_list_filters_searches_and_pages_every_task(store_url: str) -> None:
    known = small_store(store_url)
    with in_process(store_url) as url, httpx.Client(base_url=url) as http:
        first = http.get("/api/tasks", params={"per_page": 10}).json()
        assert first["total"] == 35 and first["pages"] == 4
        assert ids(first)[0] == "later-29"  # newest first
        seen = []
        for number in range(1, first["pages"] + 1):
            seen += ids(http.get("/api/tasks", params={"per_page": 10, "page": number}).json())
        assert len(seen) == len(set(seen)) == 35  # every task reachable, once
        oldest = http.get("/api/tasks", params={"order": "oldest", "per_page": 1}).json()
        assert ids(oldest) == [known["tree"]]

        def listed(**query: object) -> list[str]:
            return sorted(ids(http.get("/api/tasks", params={**query, "per_page": 500}).json()))

        assert listed(outcome="failed") == [known["bad"]]
        assert listed(kind="tree") == [known["tree"]]
        assert listed(status="terminal") == sorted([known["ok"], known["bad"]])
        assert len(listed(status="live")) == 33
        assert listed(q="503") == [known["bad"]]  # an error
        assert listed(q="DAVE") == [known["stuck"]]  # an actor, any case
        assert listed(q="carol tree") == [known["tree"]]  # every word must match
        assert listed(q="job-o") == [known["ok"]]  # an id
        assert len(listed(since="2026-01-06")) == 30  # submitted a day later
        assert listed(until="2026-01-05T09:00:30Z", kind="job") == sorted(
            [known["ok"], known["bad"], known["stuck"], known["memo"]]
        )


def test_a_bad_filter_is_answered_400_naming_it(sqlite_url: str) -> None:
    small_store(sqlite_url)
    with in_process(sqlite_url) as url, httpx.Client(base_url=url) as http:
        for query, named in (
            ({"status": "lost"}, "status 'lost'"),
            ({"page": "0"}, "page 0"),
            ({"since": "yesterday"}, "since"),
            ({"since": "2026-02-01", "until": "2026-01-01"}, "since is after until"),
        ):
            answer = http.get("/api/tasks", params=query)
            assert answer.status_code == 400 and named in answer.json()["error"]
        page = http.get("/", params={"status": "lost"})
        assert page.status_code == 400 and "status &#x27;lost&#x27;" in page.text


def test_a_task_and_its_history_say_the_rule_actor_and_reason(sqlite_url: str) -> None:
    known = small_store(sqlite_url)
    with in_process(sqlite_url) as url, httpx.Client(base_url=url) as http:
        tree = http.get(f"/api/tasks/{known['tree']}").json()
        assert [c["id"] for c in tree["children"]] == [known["ok"], known["bad"]]
        assert tree["actors"] == ["carol"]
        assert http.get(f"/api/tasks/{known['ok']}").json()["owners"] == [known["tree"]]
        events = http.get(f"/api/tasks/{known['stuck']}/history").json()["events"]
        marked = next(e for e in events if e["event_type"] == "AbortMarked")
        assert (marked["actor"], marked["reason"]) == ("dave", "stuck since the deploy")
        bad = http.get(f"/api/tasks/{known['bad']}/history").json()["events"]
        assert bad[-1]["fields"]["message"] == "source returned 503"
        assert http.get("/api/tasks/nobody").status_code == 404
        page = http.get(f"/tasks/{known['tree']}")
        assert page.status_code == 200
        assert f'href="/tasks/{known["ok"]}"' in page.text  # children and owner as links
        assert 'class="tl"' in page.text  # the report's timeline
        assert "Abort</button>" not in page.text  # no acts without a token file


def test_acts_without_a_token_are_refused_and_append_nothing(
    store_url: str, tmp_path: Path
) -> None:
    known = small_store(store_url)
    before = head(store_url)
    with in_process(store_url, token_file(tmp_path)) as url, httpx.Client(base_url=url) as http:
        for path in (
            f"/api/tasks/{known['memo']}/abort",
            "/api/tasks",
            f"/tasks/{known['memo']}/abort",
        ):
            answer = http.post(path, json={"reason": "x", "kind": "job", "phase": "run"})
            assert answer.status_code == 401, path
            assert answer.headers["www-authenticate"].startswith("Bearer")
        wrong = http.post(
            f"/api/tasks/{known['memo']}/abort",
            json={"reason": "x"},
            headers={"Authorization": "Bearer not-a-token-anyone-has"},
        )
        assert wrong.status_code == 401
    assert head(store_url) == before


def test_an_act_records_the_tokens_actor_and_reason_never_the_bodys(
    store_url: str, tmp_path: Path
) -> None:
    known = small_store(store_url)
    with in_process(store_url, token_file(tmp_path)) as url, httpx.Client(base_url=url) as http:
        done = http.post(
            f"/api/tasks/{known['memo']}/abort",
            json={"reason": "a bad deploy", "actor": "mallory"},
            headers=BEARER,
        )
        assert done.status_code == 200, done.text
        assert done.json()["actor"] == "alice" and done.json()["recorded"] is True
        submitted = http.post(
            "/api/tasks",
            json={"kind": "job", "phase": "run", "reason": "again", "memos": {"n": 1}},
            headers=BEARER,
        ).json()
        sent = http.post(
            f"/api/tasks/{submitted['task_id']}/send",
            json={"topic": "go", "value": {"x": [1, 2]}, "reason": "nudge"},
            headers=BEARER,
        ).json()
        assert sent["seq"] == 1
        history = http.get(f"/api/tasks/{known['memo']}/history").json()["events"]
        forked = http.post(
            f"/api/tasks/{known['memo']}/fork",
            json={"reason": "redo", "at": history[0]["position"]},
            headers=BEARER,
        ).json()
        assert forked["source_position"] == history[0]["position"] and forked["phase"] == "run"
    state = replay(store_url)
    mark = [
        r for r in state.audit if r["task_id"] == known["memo"] and r["event_type"] == "AbortMarked"
    ]
    assert [(r["actor"], r["reason"]) for r in mark] == [("alice", "a bad deploy")]
    new = state.world.tasks[submitted["task_id"]]
    assert dict(new.memos) == {"n": 1} and new.mailbox[0].value == {"x": [1, 2]}
    acts = [r for r in state.audit if r["task_id"] == submitted["task_id"]]
    assert {(r["actor"], r["reason"]) for r in acts if r["actor"]} == {
        ("alice", "again"),
        ("alice", "nudge"),
    }
    lineage = [r for r in state.audit if r["task_id"] == forked["task_id"] and r["actor"]]
    assert {(r["actor"], r["reason"]) for r in lineage} == {("alice", "redo")}


def test_a_refused_act_names_its_rule_and_appends_nothing(sqlite_url: str, tmp_path: Path) -> None:
    known = small_store(sqlite_url)
    before = head(sqlite_url)
    with in_process(sqlite_url, token_file(tmp_path)) as url, httpx.Client(base_url=url) as http:
        late = http.post(
            f"/api/tasks/{known['ok']}/send",
            json={"topic": "go", "value": 1, "reason": "too late"},
            headers=BEARER,
        )
        assert late.status_code == 409 and late.json()["rule"] == 20
        assert "rule 20" in late.json()["error"]
        unknown = http.post("/api/tasks/nobody/retry", json={"reason": "x"}, headers=BEARER)
        assert unknown.status_code == 404 and "nobody" in unknown.json()["error"]
        bad = http.post(
            f"/api/tasks/{known['memo']}/send", json={"topic": "go", "value": "{"}, headers=BEARER
        )
        assert bad.status_code == 200  # a JSON string is a value
        http.post(f"/api/tasks/{known['memo']}/abort", json={"reason": "x"}, headers=BEARER)
        form = http.post(
            f"/api/tasks/{known['memo']}/send",
            content="topic=go&value=%7B&reason=x",
            headers={**BEARER, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert form.status_code == 400 and "is not JSON" in form.json()["error"]
        nothing = http.post(f"/api/tasks/{known['ok']}/abort", json={"reason": "x"}, headers=BEARER)
        assert nothing.json()["recorded"] is False  # terminal: rule 4, nothing recorded
    assert head(sqlite_url) == before + 2  # the message and the abort mark, nothing else


def test_a_cookie_acts_only_with_its_csrf_value_from_the_consoles_own_origin(
    sqlite_url: str, tmp_path: Path
) -> None:
    known = small_store(sqlite_url)
    before = head(sqlite_url)
    with in_process(sqlite_url, token_file(tmp_path)) as url, httpx.Client(base_url=url) as http:
        refused = http.post("/login", data={"token": "guess-guess-guess-guess"})
        assert refused.status_code == 303 and "failed=1" in refused.headers["location"]
        signed = http.post("/login?next=/tasks/job-memo", data={"token": ALICE})
        assert signed.status_code == 303 and signed.headers["location"] == "/tasks/job-memo"
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and ALICE not in cookie
        page = http.get(f"/tasks/{known['memo']}").text
        assert "Abort</button>" in page and "acting as <b>alice</b>" in page
        csrf = page.split('name="csrf" content="')[1].split('"')[0]
        path = f"/tasks/{known['memo']}/abort"
        no_csrf = http.post(path, data={"reason": "x"}, headers={"Accept": "application/json"})
        assert no_csrf.status_code == 403
        cross = http.post(
            path,
            data={"reason": "x", "csrf": csrf},
            headers={"Origin": "http://evil.example", "Accept": "application/json"},
        )
        assert cross.status_code == 403
        cross_site = http.post(
            path,
            data={"reason": "x", "csrf": csrf},
            headers={"Sec-Fetch-Site": "cross-site", "Accept": "application/json"},
        )
        assert cross_site.status_code == 403
        assert head(sqlite_url) == before
        done = http.post(
            path,
            data={"reason": "from the page", "csrf": csrf},
            headers={"Origin": url.rstrip("/")},
        )
        assert done.status_code == 200 and "abort-marked job-memo by alice" in done.text
        assert http.post("/logout", data={"csrf": csrf}).status_code == 303
    assert head(sqlite_url) == before + 1


def test_the_stream_names_each_event_another_process_appends(store_url: str) -> None:
    known = small_store(store_url)
    with in_process(store_url) as url:
        events = Events(url + "api/stream")
        with Scheduler.open(store_url, worker="other") as other:
            new = other.submit("job", id="from-elsewhere", phase="run")
            other.abort(known["memo"], actor="erin")
        seen = events.until(lambda e: e["task_id"] == known["memo"])
        assert [(e["task_id"], e["type"]) for e in seen] == [
            (new, "TaskSubmitted"),
            (known["memo"], "AbortMarked"),
        ]
        positions = [e["position"] for e in seen]
        assert positions == sorted(positions)
        again = Events(url + "api/stream", **{"Last-Event-ID": str(positions[0] - 1)})
        assert [again.next()["position"], again.next()["position"]] == positions
        events.close()
        again.close()


def test_the_pages_escape_every_recorded_string(sqlite_url: str) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    with Scheduler.open(sqlite_url) as s:
        task = s.submit(hostile, id=f"a/b?{hostile}#c", phase=hostile, memos={hostile: hostile})
        s.abort(task, actor=hostile, reason=hostile)
    with in_process(sqlite_url) as url, httpx.Client(base_url=url) as http:
        pages = [http.get("/", params={"q": hostile}).text]
        listed = http.get("/api/tasks").json()["tasks"]
        assert [t["id"] for t in listed] == [task]
        href = "/tasks/a%2Fb%3F%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E%23c"
        assert f'href="{href}"' in pages[0]
        pages.append(http.get(href).text)
        assert http.get(href.replace("/tasks/", "/api/tasks/")).json()["id"] == task
        for page in pages:
            assert hostile not in page and "<img" not in page
            assert "&lt;img src=x onerror=alert(1)&gt;" in page
        assert "script-src 'self'" in http.get("/").headers["content-security-policy"]


def test_workers_runs_and_schedules_read_the_store(sqlite_url: str) -> None:
    small_store(sqlite_url)
    with Scheduler.open(sqlite_url, worker="w-1") as s:
        s.schedule("nightly", "job", cron="0 2 * * *", phase="run", actor="ops")
        s.heartbeat()
        with in_process(sqlite_url) as url, httpx.Client(base_url=url) as http:
            workers = http.get("/api/workers").json()["workers"]
            assert [w["worker"] for w in workers if w["live"]] == ["w-1"]
            (nightly,) = http.get("/api/schedules").json()["schedules"]
            assert (nightly["name"], nightly["cron"]) == ("nightly", "0 2 * * *")
            assert http.get("/api/runs").json() == {"runs": [], "total": 0, "page": 1}
            for path in ("/workers", "/runs", "/schedules", "/runs?live=1&day=2026-01-05"):
                assert http.get(path).status_code == 200, path
            assert "w-1" in http.get("/workers?part=live").text
            assert http.get("/runs?day=Monday").status_code == 400


@pytest.mark.parametrize("path", ["/static/console.js", "/static/console.css"])
def test_the_pages_assets_are_served(sqlite_url: str, path: str) -> None:
    small_store(sqlite_url)
    with in_process(sqlite_url) as url:
        answer = httpx.get(url + path.lstrip("/"))
        assert answer.status_code == 200 and answer.headers["x-content-type-options"] == "nosniff"
