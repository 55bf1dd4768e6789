"""The service's web pages and API (tornado), behind the hub's proxy at /services/<name>/.

Who is asking is the hub's answer only (jupyterhub.services.auth.HubOAuth): a browser logs in through the hub's
OAuth, and an API call carries the token of the student's own server (`Authorization: token ...`). No name in a
form, a notebook or a URL identifies anyone. Instructors are the members of a hub group (c.AutogradeService
.instructors_group) and the hub's admins.

    GET  /                      the student's page: assignments, budget, upload form, their attempts
    POST /submit                the upload form (multipart: assignment, notebook; XSRF-protected)
    GET  /attempts/ID           one attempt: its place in the queue (updating itself), then its verdict
    GET  /attempts/ID/report    the report of an attempt graded at the "report" level
    POST /api/attempts?assignment=ID    the notebook's bytes as the body (autograde-submit): 202 and the attempt
    GET  /api/attempts[/ID]     the caller's attempts / one of them, as JSON
    GET  /instructor            the queue, attempts and scores per assignment and day, each student's history
    GET  /instructor/attempts.csv
"""

import csv
import io
import json
import logging
import statistics
import time
from collections import defaultdict, deque
from datetime import datetime
from pathlib import Path

import jinja2
from tornado import web

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from jupyterhub.utils import url_path_join

from autograder.intake.reading import MAX_NOTEBOOK_BYTES
from autograder.service.store import GRADED, QUEUED, REFUNDED, WAITING, Attempt, Refused, Store, budget_refusal

log = logging.getLogger("autograde.service")

STATE_ZH = {QUEUED: "排队中", "grading": "评分中", GRADED: "已评分", REFUNDED: "未评分（不计次数）"}
MAX_FILENAME = 120

_env = jinja2.Environment(loader=jinja2.PackageLoader("autograder.service", "templates"),
                          autoescape=jinja2.select_autoescape(default=True, default_for_string=True))


class ServiceState:
    """What every handler shares: the store, the settings, the grading loop, the clock, the course's dates."""

    def __init__(self, store: Store, settings, loop, assignment_ids: list[str], titles: dict, deadlines,
                 secret_for, today):
        self.store, self.settings, self.loop = store, settings, loop
        self.assignment_ids, self.titles = assignment_ids, titles
        self.deadlines = deadlines  # (assignment, user) -> naive UTC datetime or None
        self.secret_for = secret_for  # (assignment, user, number, day) -> the attempt's practice secret
        self.today = today  # () -> the course's local day, "YYYY-MM-DD"
        self.recent: dict[str, deque] = defaultdict(deque)  # user -> times of their last requests that write


class Base(HubOAuthenticated, web.RequestHandler):
    def initialize(self, state: ServiceState):
        self.state = state

    def check_xsrf_cookie(self):
        """A POST that carries a token (autograde_submit.py) needs no XSRF token, a POST with the browser's cookie
        does: tornado checks XSRF before anyone asked who the caller is, and HubAuth knows a request was token-
        authenticated only once it has identified the caller; so identify first (once; the cookie's own check calls
        back here while identifying, and then goes straight to the check)."""
        if self.request.headers.get("Authorization") and not getattr(self, "_identifying", False):
            self._identifying = True
            try:
                self.current_user  # noqa: B018 (sets _token_authenticated for a valid token)
            finally:
                self._identifying = False
        return self.hub_auth.check_xsrf_cookie(self)

    @property
    def user(self) -> dict | None:
        model = self.current_user
        return model if model and model.get("kind", "user") == "user" else None

    @property
    def name(self) -> str:
        return self.user["name"]

    @property
    def instructor(self) -> bool:
        user = self.user or {}
        return bool(user.get("admin")) or self.state.settings.instructors_group in (user.get("groups") or [])

    def url(self, *parts: str) -> str:
        return url_path_join(self.hub_auth.base_url, *parts)

    def render_page(self, template: str, **values) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("X-Frame-Options", "SAMEORIGIN")
        self.set_header("Cache-Control", "no-store")
        self.finish(_env.get_template(template).render(
            base=self.hub_auth.base_url, user=self.name if self.user else "", instructor=self.user and self.instructor,
            xsrf=self.xsrf_form_html(), titles=self.state.titles, states=STATE_ZH, fmt_time=self.fmt_time, **values))

    def fmt_time(self, epoch: float | None) -> str:
        if epoch is None:
            return ""
        display = self.state.settings.display
        return display.local(datetime.utcfromtimestamp(epoch)).strftime("%Y-%m-%d %H:%M:%S")

    def write_error(self, status_code: int, **kwargs) -> None:
        """No stack trace, no exception text: what happened, in Chinese, and the status."""
        reason = {400: "请求无效", 403: "没有权限", 404: "找不到这个页面或这次提交", 405: "不支持这种请求",
                  413: "上传的文件太大", 429: "请求太频繁，请稍后再试"}.get(status_code, "评分服务出错，请稍后再试")
        if self.request.path.startswith(self.url("api")):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"status": status_code, "message": reason}, ensure_ascii=False))
        else:
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(_env.get_template("error.html.j2").render(base=self.hub_auth.base_url, status=status_code,
                                                                    reason=reason))

    def own_attempt(self, attempt_id: str) -> Attempt:
        """The attempt, if it is the caller's (or the caller is an instructor); otherwise 404, as for no attempt:
        an id of someone else's tells nothing."""
        attempt = self.state.store.get(attempt_id) if len(attempt_id) <= 64 else None
        if attempt is None or (attempt.user != self.name and not self.instructor):
            raise web.HTTPError(404)
        return attempt

    def limit_rate(self) -> None:
        """Refuse a user's writes beyond the rate (a sliding minute), whatever they are."""
        times, now = self.state.recent[self.name], time.monotonic()
        while times and times[0] < now - 60:
            times.popleft()
        if len(times) >= self.state.settings.rate_per_minute:
            raise web.HTTPError(429)
        times.append(now)

    def budget(self, assignment_id: str) -> dict:
        policy = self.state.settings.policy(assignment_id)
        today, total = self.state.store.used(self.name, assignment_id, self.state.today())
        due = self.state.deadlines(assignment_id, self.name)
        return {"today": today, "per_day": policy.attempts_per_day, "total": total,
                "attempts_total": policy.attempts_total, "feedback": policy.feedback,
                "due": due, "due_text": self.state.settings.display.format(due) if due else "",
                "closed": due is not None and datetime.utcnow() > due}

    def hand_in(self, assignment_id: str, filename: str, content: bytes) -> Attempt:
        """Check and store one attempt (stored, then acknowledged), or raise Refused."""
        if assignment_id not in self.state.assignment_ids:
            raise Refused("没有这份作业：请选择课程里的一份作业")
        if not content:
            raise Refused("上传的文件是空的：请选择你的 .ipynb 笔记本")
        if len(content) > MAX_NOTEBOOK_BYTES:
            raise Refused(f"笔记本太大（上限 {MAX_NOTEBOOK_BYTES // 1024**2} MiB）：请清除输出后重新提交")
        budget = self.budget(assignment_id)  # the cheap refusals before the notebook is parsed
        if budget["closed"]:
            raise Refused(f"这份作业已经截止（{budget['due_text']}，含你的延期）：练习评分已关闭，不再评分")
        refusal = budget_refusal(budget["total"], budget["attempts_total"], budget["today"], budget["per_day"])
        if refusal:  # checked again, under the store's lock, when it is stored
            raise Refused(refusal)
        problem = notebook_problem(content)
        if problem:
            raise Refused(problem)
        policy = self.state.settings.policy(assignment_id)
        day = self.state.today()
        name = self.name
        attempt = self.state.store.add(
            name, assignment_id, clean_filename(filename, assignment_id), content, day, policy.feedback,
            lambda number: self.state.secret_for(assignment_id, name, number, day), policy.attempts_per_day,
            policy.attempts_total, self.state.settings.rate_per_minute)
        self.state.loop.wake()
        return attempt


def clean_filename(name: str, assignment_id: str) -> str:
    name = Path(str(name or "")).name
    name = "".join(ch for ch in name if ch.isprintable())[:MAX_FILENAME]
    return name if name.endswith(".ipynb") else f"{assignment_id}.ipynb"


def notebook_problem(content: bytes) -> str | None:
    """Why these bytes are not a notebook that can be graded (Chinese), or None: the checks of the students'
    checker (UTF-8, JSON, nbformat 4, well-formed cells); everything else is the grading's to judge."""
    from autograder.tools.student_check import Unreadable, parse_notebook

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return "笔记本文件不是 UTF-8 编码，可能已损坏；请用 Jupyter 重新保存"
    try:
        parse_notebook(text)
    except Unreadable as exc:
        return str(exc)
    return None


class Home(Base):
    @web.authenticated
    def get(self):
        if not self.user:
            raise web.HTTPError(403)
        budgets = {a: self.budget(a) for a in self.state.assignment_ids}
        self.render_page("home.html.j2", budgets=budgets, attempts=self.state.store.history(self.name, limit=200),
                         refused="")


class SubmitForm(Base):
    @web.authenticated
    def post(self):
        if not self.user:
            raise web.HTTPError(403)
        self.limit_rate()
        files = self.request.files.get("notebook") or []
        assignment_id = self.get_body_argument("assignment", "")
        try:
            if not files:
                raise Refused("请选择要提交的笔记本文件（.ipynb）")
            attempt = self.hand_in(assignment_id, files[0].filename, files[0].body)
        except Refused as refused:
            self.set_status(400)
            budgets = {a: self.budget(a) for a in self.state.assignment_ids}
            return self.render_page("home.html.j2", budgets=budgets, refused=refused.message,
                                    attempts=self.state.store.history(self.name, limit=200))
        self.redirect(self.url("attempts", attempt.id))


class AttemptPage(Base):
    @web.authenticated
    def get(self, attempt_id: str):
        attempt = self.own_attempt(attempt_id)
        position = self.state.store.position(attempt) if attempt.state in WAITING else None
        self.render_page("attempt.html.j2", a=attempt, position=position, budget=self.budget(attempt.assignment),
                         view=attempt.view or {})


class AttemptReport(Base):
    @web.authenticated
    def get(self, attempt_id: str):
        attempt = self.own_attempt(attempt_id)
        html = (attempt.view or {}).get("report_html") if attempt.state == GRADED else None
        if not html:
            raise web.HTTPError(404)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("X-Frame-Options", "SAMEORIGIN")
        self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                        "base-uri 'none'; form-action 'none'; frame-ancestors 'self'; sandbox allow-same-origin")
        self.finish(html)


class NotFound(Base):
    """Every other path: the service's own 404 page."""

    def prepare(self):
        raise web.HTTPError(404)


def attempt_json(handler: Base, attempt: Attempt) -> dict:
    view = attempt.view or {}
    return {"id": attempt.id, "assignment": attempt.assignment, "number": attempt.number, "state": attempt.state,
            "created": handler.fmt_time(attempt.created),
            "position": handler.state.store.position(attempt) if attempt.state in WAITING else None,
            "score": view.get("score") if view.get("level") else None, "max_score": view.get("max_score"),
            "message": attempt.message, "url": handler.request.full_url().split("/api/")[0] + "/attempts/" + attempt.id}


class Api(Base):
    # POST is called with a token (autograde_submit.py): HubOAuth's XSRF check lets a token-authenticated request
    # through and refuses a POST that has only the browser's cookie and no XSRF token (another site's form)
    def prepare(self):
        if not self.user:
            raise web.HTTPError(403)

    def get(self, attempt_id: str | None = None):
        self.set_header("Content-Type", "application/json")
        if attempt_id:
            return self.finish(json.dumps(attempt_json(self, self.own_attempt(attempt_id)), ensure_ascii=False))
        self.finish(json.dumps([attempt_json(self, a) for a in self.state.store.history(self.name, limit=200)],
                               ensure_ascii=False))

    def post(self, attempt_id: str | None = None):
        if attempt_id:
            raise web.HTTPError(405)
        self.limit_rate()
        self.set_header("Content-Type", "application/json")
        try:
            attempt = self.hand_in(self.get_query_argument("assignment", ""),
                                   self.get_query_argument("filename", ""), self.request.body)
        except Refused as refused:
            self.set_status(400)
            return self.finish(json.dumps({"status": 400, "message": refused.message}, ensure_ascii=False))
        self.set_status(202)
        self.finish(json.dumps(attempt_json(self, attempt), ensure_ascii=False))


class Instructor(Base):
    def prepare(self):
        if not self.current_user:
            return  # @web.authenticated sends the browser to the hub's login
        if not self.user or not self.instructor:  # a student, or a hub service's token
            raise web.HTTPError(403)

    @web.authenticated
    def get(self):
        student = self.get_query_argument("student", None)
        attempts = self.state.store.history(student, limit=100_000)
        per = defaultdict(lambda: defaultdict(list))  # assignment -> day -> scores of graded attempts
        counts = defaultdict(lambda: defaultdict(int))
        for a in attempts:
            counts[a.assignment][a.day] += 1
            if a.state == GRADED and a.score is not None:
                per[a.assignment][a.day].append(a.score)
        table = []
        for assignment in self.state.assignment_ids:
            for day in sorted(counts[assignment]):
                scores = per[assignment][day]
                table.append({"assignment": assignment, "day": day, "attempts": counts[assignment][day],
                              "students": len({a.user for a in attempts if a.assignment == assignment
                                               and a.day == day}),
                              "graded": len(scores), "median": statistics.median(scores) if scores else None,
                              "low": min(scores) if scores else None, "high": max(scores) if scores else None})
        self.render_page("instructor.html.j2", table=table, student=student, attempts=attempts[:500],
                         waiting=self.state.store.waiting(), total=len(attempts))


class InstructorCsv(Instructor):
    @web.authenticated
    def get(self):
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["attempt", "student", "assignment", "number", "state", "day", "submitted", "graded",
                         "score", "max_score"])
        for a in reversed(self.state.store.history(limit=1_000_000)):
            writer.writerow([_cell(str(v)) for v in (
                a.id, a.user, a.assignment, a.number, a.state, a.day, self.fmt_time(a.created),
                self.fmt_time(a.finished), "" if a.score is None else f"{a.score:g}",
                "" if a.max_score is None else f"{a.max_score:g}")])
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", "attachment; filename=practice-attempts.csv")
        self.finish(out.getvalue())


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def make_app(state: ServiceState, prefix: str, cookie_secret: bytes) -> web.Application:
    route = lambda path: url_path_join(prefix, path)  # noqa: E731
    handlers = [
        (prefix, Home), (route("submit"), SubmitForm),
        (route(r"attempts/([A-Za-z0-9_\-]+)"), AttemptPage), (route(r"attempts/([A-Za-z0-9_\-]+)/report"), AttemptReport),
        (route("api/attempts"), Api), (route(r"api/attempts/([A-Za-z0-9_\-]+)"), Api),
        (route("instructor"), Instructor), (route("instructor/attempts.csv"), InstructorCsv),
        (route("oauth_callback"), HubOAuthCallbackHandler),
    ]
    kwargs = {"state": state}
    return web.Application([(path, handler, None if handler is HubOAuthCallbackHandler else kwargs)
                            for path, handler in handlers],
                           default_handler_class=NotFound, default_handler_args=kwargs,
                           cookie_secret=cookie_secret, xsrf_cookies=True, debug=False, serve_traceback=False)
