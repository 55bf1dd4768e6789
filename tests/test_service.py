"""`autograde serve` as the course's JupyterHub runs it: a real hub (tests/hub.py), the service started by the hub as a
managed service, students logged in through the hub (in Chromium, and with their API tokens), real grading in the
sandbox. What issue 26 asks the service to show: each student their own report and nobody else's, the budget and its
refunds, practice inputs apart from the final grading's, nothing lost across a restart, and the security rules."""

import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from browser import BrowserError, Chromium
from grading_helpers import TEST_LIMITS, edited_notebook
from hub import local_session, running_hub

from autograder.course import student_seed
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.examples import mistakes
from autograder.intake.reading import MAX_NOTEBOOK_BYTES
from autograder.service.practice import practice_secret

pytestmark = pytest.mark.slow

COURSE_SECRET = secrets.token_hex(32).encode()  # the final grading's; the service is given only its HMAC
PRACTICE = practice_secret(COURSE_SECRET).decode()
NO_SQRT = next(m for m in mistakes("rmsnorm") if m.name == "no_sqrt")
NO_SQRT_NAMED = "漏了开根号"  # autograder/catalogue/rmsnorm.py: the no_sqrt variant's explanation
USERS = ["alice", "bob", "carol", "dave", "erin", "teacher"]
CONFIG = """c = get_config()
c.AutogradeService.attempts_per_day = 5
c.AutogradeService.rate_per_minute = 6
c.AutogradeService.assignments = {"rmsnorm": {"attempts_per_day": 2}, "swiglu": {"feedback": "checks"},
                                  "gqa_saving": {"feedback": "score"}}
"""
TERMINAL = ("graded", "refunded")


def service(name: str, course: Path, **environment) -> dict:
    return {"name": name, "command": [sys.executable, "-m", "autograder.cli", "serve", "--course", str(course),
                                      "--workers", "1"],
            "environment": {"AUTOGRADE_PRACTICE_SECRET": PRACTICE, **environment}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    course, broken = root / "course", root / "broken-course"
    for folder in (course, broken):
        folder.mkdir()
        (folder / "nbgrader_config.py").write_text(CONFIG)
    # gqa_saving was due yesterday; alice has three more days (the instructor's documented steps)
    import subprocess
    from datetime import datetime, timedelta, timezone

    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S UTC")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(bin_dir / "nbgrader"), "db", "assignment", "add", "gqa_saving", f"--duedate={yesterday}"],
                   cwd=course, env=env, check=True, capture_output=True, timeout=120)
    (root / "roster.csv").write_text("id\n" + "\n".join(USERS) + "\n")  # the roster
    subprocess.run([str(bin_dir / "nbgrader"), "db", "student", "import", str(root / "roster.csv")], cwd=course,
                   env=env, check=True, capture_output=True, timeout=120)
    subprocess.run([str(bin_dir / "autograde"), "extension", "gqa_saving", "alice", "--days", "3", "--course",
                    str(course)], env=env, check=True, capture_output=True, timeout=120)
    notebooks = {
        "good": edited_notebook("rmsnorm", [], root / "nb" / "rmsnorm.ipynb"),
        "wrong": edited_notebook("rmsnorm", NO_SQRT.edits, root / "nb" / "wrong" / "rmsnorm.ipynb"),
        "swiglu": edited_notebook("swiglu", [], root / "nb" / "swiglu.ipynb"),
    }
    services = [service("autograde", course),
                # the same service whose sandbox cannot start (its environment is missing): our failure, never the
                # student's, so every attempt there is given back
                service("autograde-broken", broken, AUTOGRADE_SANDBOX_SITE=str(root / "no-sandbox-environment"))]
    # the hub notices a managed service that died within a second (its poll; 30 s by default) and starts it again
    # another hub service allowed to reach this one: a service is no student and no instructor
    other_token = secrets.token_hex(32)
    services.append({"name": "other-service", "api_token": other_token})
    roles = [{"name": "other-service", "services": ["other-service"],
              "scopes": ["access:services!service=autograde"]}]
    with running_hub(root / "hub", services=services, users=USERS, groups={"instructors": ["teacher"]}, roles=roles,
                     extra_config="c.Spawner.poll_interval = 1\n") as hub:
        yield {"hub": hub, "course": course, "broken": broken, "notebooks": notebooks, "seen": [],
               "other_service_token": other_token}


def api(setup, user: str, method: str, path: str = "", name: str = "autograde", **kw):
    """A call to the service's API with `user`'s token (what their own server holds), as autograde_submit.py makes it."""
    hub = setup["hub"]
    tokens = setup.setdefault("tokens", {})
    if user not in tokens:
        tokens[user] = hub.user_token(user)
    with local_session() as session:
        reply = session.request(method, hub.service_url(name) + "api/attempts" + path, timeout=60,
                                headers={"Authorization": f"token {tokens[user]}"}, allow_redirects=False, **kw)
    setup["seen"].append(reply.text)
    return reply


def submit(setup, user: str, notebook: Path, assignment: str = "rmsnorm", name: str = "autograde"):
    return api(setup, user, "POST", f"?assignment={assignment}&filename={notebook.name}", name=name,
               data=notebook.read_bytes())


def wait_graded(setup, user: str, attempt_id: str, name: str = "autograde", timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        reply = api(setup, user, "GET", f"/{attempt_id}", name=name)
        if reply.status_code == 200 and reply.json()["state"] in TERMINAL:
            return reply.json()
        assert time.monotonic() < deadline, (reply.status_code, reply.text, setup["hub"].log_tail())
        time.sleep(0.5)


def stored(setup, attempt_id: str, course_key: str = "course") -> dict:
    """The service's own row of an attempt (its SQLite store in the course folder)."""
    db = sqlite3.connect(setup[course_key] / "service.sqlite")
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("select * from attempts where id = ?", (attempt_id,)).fetchone()
        return dict(row)
    finally:
        db.close()


def browser_text(tab) -> str:
    """The page's text, once it has loaded (the attempt's page reloads itself while it waits)."""
    for _ in range(50):
        try:
            return tab.text()
        except BrowserError:
            time.sleep(0.2)
    return tab.text()


def goto(tab, url: str, timeout: float = 60) -> str:
    """Go to `url` and return the page's text once that page is the one loaded (a load event left over from a page
    that refreshed itself does not count)."""
    tab.submit(f"location.href = {json.dumps(url)}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            if tab.evaluate("location.href") == url and tab.evaluate("document.readyState") == "complete":
                return tab.text()
        except BrowserError:
            pass
        assert time.monotonic() < deadline, url
        time.sleep(0.2)


def upload_in_browser(tab, notebook: Path, assignment: str) -> None:
    """Choose `notebook` in the upload form's file input and press 提交, as a student does (the file's bytes are
    handed to the input through a DataTransfer, which is what a drag-and-drop does)."""
    tab.submit(f"""(() => {{
        const file = new File([{json.dumps(notebook.read_text())}], {json.dumps(notebook.name)},
                              {{type: "application/x-ipynb+json"}});
        const chosen = new DataTransfer();
        chosen.items.add(file);
        document.getElementById("notebook").files = chosen.files;
        document.getElementById("assignment").value = {json.dumps(assignment)};
        document.getElementById("submit").click();
    }})()""")


def wait_in_browser(tab, timeout: float = 240) -> str:
    """The attempt's page, refreshing itself, until it shows the verdict: read only once the browser has parsed the
    whole page (read mid-load, the text may end at the verdict, before the budget line below it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            loaded = tab.evaluate("document.readyState === 'complete' ? document.body.innerText : ''")
        except BrowserError:
            loaded = ""
        text = loaded or browser_text(tab)
        if loaded and ("练习得分" in text or "没能评分" in text):
            return text
        assert time.monotonic() < deadline, text
        time.sleep(0.5)


def report_text(tab, timeout: float = 30) -> str:
    """The text of the report the attempt's page shows in its frame, once the frame has loaded."""
    deadline = time.monotonic() + timeout
    while True:
        text = tab.evaluate("(() => { const d = document.getElementById('report').contentDocument;"
                            " return d && d.readyState === 'complete' && d.body ? d.body.textContent : ''; })()")
        if text.strip() or time.monotonic() > deadline:
            return text
        time.sleep(0.2)


def test_two_students_each_see_their_own_report_in_the_browser_and_not_the_others(setup):
    hub = setup["hub"]
    home = hub.service_url("autograde")
    with Chromium() as alice_browser, Chromium() as bob_browser:
        tabs = {}
        for user, browser in (("alice", alice_browser), ("bob", bob_browser)):
            tab = browser.open(hub.url + "/hub/login")
            hub.login_in_browser(tab, user)
            tab.submit(f"location.href = {json.dumps(home)}")  # the service's OAuth through the hub, then its page
            assert urlsplit(tab.evaluate("location.href")).path == "/services/autograde/"
            assert user in browser_text(tab)
            tabs[user] = tab
        upload_in_browser(tabs["alice"], setup["notebooks"]["good"], "rmsnorm")
        upload_in_browser(tabs["bob"], setup["notebooks"]["wrong"], "rmsnorm")
        ids = {}
        for user, tab in tabs.items():
            path = urlsplit(tab.evaluate("location.href")).path
            assert re.fullmatch(r"/services/autograde/attempts/[A-Za-z0-9_\-]{32}", path), path
            ids[user] = path.rsplit("/", 1)[1]
        texts = {user: wait_in_browser(tab) for user, tab in tabs.items()}
        reports = {user: report_text(tab) for user, tab in tabs.items()}
        assert "练习得分：8 / 8" in texts["alice"], texts["alice"]
        assert "练习评分，不是最终成绩" in reports["alice"] and NO_SQRT_NAMED not in reports["alice"]
        assert "练习得分：8 / 8" not in texts["bob"], texts["bob"]
        assert NO_SQRT_NAMED in reports["bob"], reports["bob"]  # the wrong one: its mistake named
        # the budget, after one graded attempt of two a day
        assert "这份作业今天已用 1 / 2 次" in texts["alice"]
        goto(tabs["alice"], home)
        row = tabs["alice"].evaluate("document.querySelector('tr[data-assignment=rmsnorm]').innerText")
        assert "1 / 2" in row and "1 / 20" in row, row
        # bob's attempt, its report, and his list are not alice's to see: the same 404 as an id that does not exist
        for path in (f"attempts/{ids['bob']}", f"attempts/{ids['bob']}/report", "attempts/" + "x" * 32):
            text = goto(tabs["alice"], home + path)
            assert "找不到这个页面或这次提交" in text and NO_SQRT_NAMED not in text and "bob" not in text, text
        assert ids["bob"] not in browser_text(tabs["alice"])
        for user, tab in tabs.items():
            setup["seen"].append(tab.evaluate("document.documentElement.outerHTML"))
    setup["browser_attempts"] = ids
    listed = api(setup, "alice", "GET").json()
    assert [a["id"] for a in listed] == [ids["alice"]]


def test_the_budget_refuses_the_next_attempt_with_a_message(setup):
    first = submit(setup, "dave", setup["notebooks"]["good"])
    second = submit(setup, "dave", setup["notebooks"]["good"])
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    third = submit(setup, "dave", setup["notebooks"]["good"])
    assert third.status_code == 400
    assert third.json()["message"] == "今天这份作业的练习评分次数已用完（每天 2 次），明天再试"
    # another assignment has its own budget
    other = submit(setup, "dave", setup["notebooks"]["swiglu"], assignment="swiglu")
    assert other.status_code == 202, other.text
    for reply in (first, second, other):
        assert wait_graded(setup, "dave", reply.json()["id"])["state"] == "graded"
    assert len(api(setup, "dave", "GET").json()) == 3  # the refused one was never stored
    # swiglu's feedback is "checks": each check passed or not, what it verifies, no report
    session = setup["hub"].login("dave")
    page = session.get(setup["hub"].service_url("autograde") + "attempts/" + other.json()["id"], timeout=60)
    assert page.status_code == 200 and "练习得分：" in page.text
    assert page.text.count("✓ 通过：") >= 5 and "✗" not in page.text and "<iframe" not in page.text, page.text
    report = session.get(setup["hub"].service_url("autograde") + "attempts/" + other.json()["id"] + "/report",
                         timeout=60)
    assert report.status_code == 404


def test_after_the_due_date_and_the_students_extension_nothing_is_graded(setup):
    gqa = edited_notebook("gqa_saving", [], setup["notebooks"]["good"].parent / "gqa_saving.ipynb")
    refused = submit(setup, "bob", gqa, assignment="gqa_saving")
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"].startswith("这份作业已经截止（") and "含你的延期）：练习评分已关闭，不再评分" \
        in refused.json()["message"]
    page = setup["hub"].login("bob").get(setup["hub"].service_url("autograde"), timeout=60).text
    assert re.search(r'<option value="gqa_saving" disabled>[^<]*（已截止）</option>', page), page
    accepted = submit(setup, "alice", gqa, assignment="gqa_saving")  # her extension: three more days
    assert accepted.status_code == 202, accepted.text
    assert wait_graded(setup, "alice", accepted.json()["id"])["state"] == "graded"
    # gqa_saving's feedback is "score": the score, and nothing of the checks
    session = setup["hub"].login("alice")
    page = session.get(setup["hub"].service_url("autograde") + "attempts/" + accepted.json()["id"], timeout=60).text
    assert "练习得分：" in page and "✓" not in page and "✗" not in page and "<iframe" not in page, page
    assert not [a for a in api(setup, "bob", "GET").json() if a["assignment"] == "gqa_saving"]


def test_an_infrastructure_error_gives_the_attempt_back(setup):
    notebook = setup["notebooks"]["good"]
    attempts = []
    for _ in range(3):  # more than the day's two: refunded attempts do not count
        reply = submit(setup, "erin", notebook, name="autograde-broken")
        assert reply.status_code == 202, reply.text
        attempts.append(wait_graded(setup, "erin", reply.json()["id"], name="autograde-broken"))
    for attempt in attempts:
        assert attempt["state"] == "refunded" and attempt["score"] is None
        assert "原因在评分服务这边（不是你的代码）" in attempt["message"] and "不计入次数" in attempt["message"]
    session = setup["hub"].login("erin")
    page = session.get(setup["hub"].service_url("autograde-broken"), timeout=60).text
    row = re.search(r'<tr data-assignment="rmsnorm">.*?</tr>', page, re.S).group(0)
    assert "<td>0 / 2</td>" in row and "<td>0 / 20</td>" in row, row
    attempt_page = session.get(setup["hub"].service_url("autograde-broken") + "attempts/" + attempts[0]["id"],
                               timeout=60).text
    assert "这次不计入次数" in attempt_page and "Traceback" not in attempt_page
    setup["seen"] += [page, attempt_page]


def test_practice_inputs_are_not_the_final_gradings(setup, tmp_path):
    """Same notebook, same student: each practice attempt draws other hidden inputs than the last and than the final
    grading (autograde grade, with the course secret), and a correct answer passes every one of them."""
    ids = [submit(setup, "carol", setup["notebooks"]["good"]).json()["id"] for _ in range(2)]
    for attempt_id in ids:
        assert wait_graded(setup, "carol", attempt_id)["score"] == 8
    practice = [json.loads(stored(setup, a)["result"]) for a in ids]
    final = grade_batch([Submission(setup["notebooks"]["good"], "rmsnorm", "carol")],
                        GradingOptions(limits=TEST_LIMITS, secret=COURSE_SECRET))[0]
    assert final.seed == student_seed(COURSE_SECRET, "rmsnorm", "carol")
    seeds = [r["seed"] for r in practice] + [final.seed]
    assert len(set(seeds)) == 3, seeds
    assert final.score == final.max_score
    verdicts = [{c["name"]: c["passed"] for p in r["parts"] for c in p["checks"]} for r in practice]
    assert verdicts[0] == verdicts[1] == {c.name: c.passed for p in final.parts for c in p.checks}
    assert all(verdicts[0].values())


def test_an_attempt_queued_when_the_service_is_killed_is_graded_after_the_hub_restarts_it(setup):
    hub = setup["hub"]
    ids = [submit(setup, "bob", setup["notebooks"]["swiglu"], assignment="swiglu").json()["id"] for _ in range(3)]

    def service_pid() -> int:
        procs = hub.processes()["autograde"]  # the service, and its grading worker (a child of it)
        procs = [p for p in procs if p.cmdline.endswith("--workers 1")]
        assert len(procs) == 1, procs
        return procs[0].pid

    killed = service_pid()
    deadline = time.monotonic() + 120
    while stored(setup, ids[0])["state"] != "grading":  # mid-queue: one being graded, the others waiting
        assert time.monotonic() < deadline
        time.sleep(0.1)
    os.kill(killed, signal.SIGKILL)
    states = [stored(setup, a)["state"] for a in ids]
    assert "queued" in states, states
    for attempt_id in ids:
        assert wait_graded(setup, "bob", attempt_id, timeout=300)["state"] == "graded"
    assert service_pid() != killed
    assert f"Service autograde exited with status -{signal.SIGKILL}" in hub.log_text()
    # the batch folder the killed service was grading from (bob's notebooks in it) is gone: its successor removed it
    assert not list(Path(tempfile.gettempdir()).glob(f"autograde-service-{killed}-*"))
    assert len([a for a in api(setup, "bob", "GET").json() if a["assignment"] == "swiglu"]) == 3


def test_forms_need_their_xsrf_token(setup):
    session = setup["hub"].login("carol")
    home = setup["hub"].service_url("autograde")
    assert session.get(home, timeout=60).status_code == 200  # logged in at the service (its OAuth cookie)
    before = len(api(setup, "carol", "GET").json())
    notebook = setup["notebooks"]["good"]
    reply = session.post(home + "submit", data={"assignment": "rmsnorm"}, timeout=60, allow_redirects=False,
                         files={"notebook": (notebook.name, notebook.read_bytes())})
    # without the form's _xsrf the cookie does not identify anyone: the browser is sent to log in, nothing stored
    assert reply.status_code in (302, 403), reply.status_code
    assert len(api(setup, "carol", "GET").json()) == before
    form = session.get(home, timeout=60).text
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form).group(1)
    refused = session.post(home + "submit", data={"assignment": "rmsnorm", "_xsrf": xsrf}, timeout=60,
                           files={"notebook": ("empty.ipynb", b"")})
    assert refused.status_code == 400 and "上传的文件是空的" in refused.text  # with it, the form is answered


def test_uploads_over_the_cap_are_refused_before_they_are_read(setup):
    before = len(api(setup, "alice", "GET").json())
    # a body the server reads (under its max_body_size) but over the notebook cap: refused with the cap said
    reply = api(setup, "alice", "POST", "?assignment=swiglu", data=b"{" + b" " * (MAX_NOTEBOOK_BYTES + 10) + b"}")
    assert reply.status_code == 400 and "笔记本太大（上限" in reply.json()["message"], reply.text[:300]
    # a body the server would not take at all: answered from its Content-Length, the body never sent
    url = urlsplit(setup["hub"].services["autograde"]["url"])
    with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
        conn.sendall((f"POST /services/autograde/api/attempts?assignment=swiglu HTTP/1.1\r\nHost: {url.netloc}\r\n"
                      f"Authorization: token {setup['tokens']['alice']}\r\n"
                      f"Content-Length: {10 * MAX_NOTEBOOK_BYTES}\r\n\r\n").encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert len(api(setup, "alice", "GET").json()) == before
    # tornado answers a Content-Length over max_body_size with 400 and closes the connection (the loop above ended:
    # the server hung up without waiting for the 50 MiB it was promised)
    assert answer == b"HTTP/1.1 400 Bad Request\r\n\r\n", answer[:200]


def test_a_students_writes_are_rate_limited(setup):
    codes = [api(setup, "teacher", "POST", "?assignment=swiglu", data=b"").status_code for _ in range(7)]
    assert codes == [400] * 6 + [429], codes
    reply = api(setup, "teacher", "POST", "?assignment=swiglu", data=b"")
    assert reply.json() == {"status": 429, "message": "请求太频繁，请稍后再试"}


def test_only_instructors_reach_the_instructors_page(setup):
    hub = setup["hub"]
    url = hub.service_url("autograde") + "instructor"
    student = hub.login("alice")
    for path in ("", "/attempts.csv", "?student=bob"):
        reply = student.get(url + path, timeout=60)
        assert reply.status_code == 403 and "没有权限" in reply.text and "bob" not in reply.text
    with local_session() as session:  # a hub service's token, allowed to reach the service: still not an instructor
        for path in ("", "/attempts.csv"):
            reply = session.get(url + path, headers={"Authorization": f"token {setup['other_service_token']}"},
                                allow_redirects=False, timeout=60)
            assert reply.status_code == 403 and "alice" not in reply.text, (path, reply.status_code)
        reply = session.get(hub.service_url("autograde") + "api/attempts", allow_redirects=False, timeout=60,
                            headers={"Authorization": f"token {setup['other_service_token']}"})
        assert reply.status_code == 403
    teacher = hub.login("teacher")
    page = teacher.get(url, timeout=60)
    assert page.status_code == 200 and "alice" in page.text and "rmsnorm" in page.text
    history = teacher.get(url + "?student=bob", timeout=60).text
    assert "bob" in history and "alice</td>" not in history
    csv = teacher.get(url + "/attempts.csv", timeout=60)
    assert csv.headers["Content-Type"].startswith("text/csv")
    rows = csv.text.splitlines()
    assert rows[0].startswith("attempt,student,assignment,number,state")
    assert any(",alice,rmsnorm,1,graded," in row for row in rows), rows
    setup["seen"] += [page.text, history, csv.text]
    # the instructor's page as the instructor reads it: logged in through the hub in Chromium
    with Chromium() as browser:
        tab = browser.open(hub.url + "/hub/login")
        hub.login_in_browser(tab, "teacher")
        text = goto(tab, url)
        assert "Waiting in the queue" in text and "alice" in text and "bob" in text, text
        days = tab.evaluate("[...document.querySelectorAll('#days tr')].map(r => r.innerText)")
        assert any(row.startswith("rmsnorm\t") for row in days), days
        assert not tab.errors, tab.errors


def test_errors_show_no_stack_trace_and_nothing_carries_a_secret(setup):
    hub = setup["hub"]
    session = hub.login("alice")
    base = hub.service_url("autograde")
    for path, status in (("attempts/" + "a" * 70, 404), ("no-such-page", 404), ("api/attempts/" + "b" * 32, 404)):
        reply = session.get(base + path, timeout=60)
        assert reply.status_code == status, (path, reply.status_code)
        assert "Traceback" not in reply.text and 'File "' not in reply.text
        setup["seen"].append(reply.text)
    wrong_method = api(setup, "alice", "POST", "/" + "c" * 32, data=b"{}")
    assert wrong_method.status_code == 405 and "Traceback" not in wrong_method.text
    db = sqlite3.connect(setup["course"] / "service.sqlite")
    attempt_secrets = [row[0] for row in db.execute("select secret from attempts")]
    db.close()
    assert attempt_secrets
    everything = "\n".join(setup["seen"])
    for secret in [COURSE_SECRET.decode(), PRACTICE, *attempt_secrets]:
        assert secret not in everything
    assert COURSE_SECRET.decode() not in hub.log_text() and PRACTICE not in hub.log_text()


def test_the_released_submit_script_hands_in_from_a_students_terminal(setup):
    """release/<id>/autograde_submit.py as a student runs it in their server's terminal: the token and the
    service's address from the environment their hub gives that server."""
    import subprocess

    from autograder import REPO_ROOT

    script = REPO_ROOT / "release" / "rmsnorm" / "autograde_submit.py"
    # the scopes of a server's own token as the README's jupyterhub_config.py sets them (c.Spawner.server_token_scopes:
    # the `server` role's, which a user's token cannot be given here as they name a server, and the service's access)
    token = setup["hub"].user_token("erin", scopes=["users:activity!user", "access:services!service=autograde"])
    # ... without the service's access (the `server` role alone, JupyterHub's default) the service refuses it
    default_scopes = setup["hub"].user_token("erin", scopes=["users:activity!user"])
    env = {"PATH": os.environ["PATH"], "JUPYTERHUB_API_TOKEN": token,
           "AUTOGRADE_SERVICE_URL": setup["hub"].service_url("autograde")}
    wrong = subprocess.run([sys.executable, str(script), str(setup["notebooks"]["wrong"])], env=env,
                           capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 0, (wrong.stdout, wrong.stderr)
    assert "已提交（第 1 次练习）" in wrong.stdout and "练习得分：" in wrong.stdout and "（不是最终成绩）" in wrong.stdout
    assert "练习得分：8 / 8" not in wrong.stdout
    report = re.search(r"报告：(\S+)", wrong.stdout).group(1)
    assert urlsplit(report).path.startswith("/services/autograde/attempts/")
    refused = subprocess.run([sys.executable, str(script), str(setup["notebooks"]["good"]), "--no-wait"],
                             env={**env, "JUPYTERHUB_API_TOKEN": "0" * 43}, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 1 and "没有提交：没有权限" in refused.stdout, refused.stdout
    default = subprocess.run([sys.executable, str(script), str(setup["notebooks"]["good"]), "--no-wait"],
                             env={**env, "JUPYTERHUB_API_TOKEN": default_scopes}, capture_output=True, text=True,
                             timeout=120)
    assert default.returncode == 1 and "没有提交：没有权限" in default.stdout, default.stdout
    no_token = subprocess.run([sys.executable, str(script), str(setup["notebooks"]["good"])],
                              env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    assert no_token.returncode == 2 and "JUPYTERHUB_API_TOKEN" in no_token.stdout


def test_the_load_benchmark_loses_nothing_with_fifty_students(tmp_path):
    """benchmarks/service_load.py --students 50, as the README runs it: a hub of its own, 50 students handing in within
    half a minute, every attempt graded and seen by its student."""
    import subprocess

    from autograder import REPO_ROOT

    run = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "service_load.py"), "--students", "50",
                          "--spread", "30"], capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert re.fullmatch(r"service: 50 attempts, 0 lost, p95 \d+\.\d s from submit to report, max queue \d+", last), last
    assert "correct: " in run.stdout and "wrong: " in run.stdout and "broken: " in run.stdout
