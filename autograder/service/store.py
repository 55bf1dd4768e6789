"""The service's attempts, stored before they are acknowledged: SQLite by default, the same schema on PostgreSQL
(any SQLAlchemy URL), so that a restart of the service loses nothing (an attempt being graded when the service
stopped is queued again when it starts).

One row per attempt: who (the hub user), which assignment, its number among that student's attempts at it, its
state (queued -> grading -> graded | refunded), the notebook as handed in, and once graded the score, what the
student is shown (at the assignment's feedback level) and the whole result (for the instructor). The id is
unguessable (secrets.token_urlsafe); every read of an attempt the service answers is also checked against the
user, so an id alone reads nothing.
"""

import json
import secrets
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa

QUEUED, GRADING, GRADED, REFUNDED = "queued", "grading", "graded", "refunded"
WAITING = (QUEUED, GRADING)

metadata = sa.MetaData()
attempts = sa.Table(
    "attempts", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("user", sa.String(255), nullable=False, index=True),
    sa.Column("assignment", sa.String(64), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("day", sa.String(10), nullable=False),  # the course's local day it was handed in on (the budget's)
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("started", sa.Float),
    sa.Column("finished", sa.Float),
    sa.Column("filename", sa.String(255), nullable=False),
    sa.Column("notebook", sa.LargeBinary, nullable=False),
    sa.Column("secret", sa.String(128), nullable=False),  # the attempt's practice secret (autograder.service.practice)
    sa.Column("feedback", sa.String(16), nullable=False),
    sa.Column("score", sa.Float),
    sa.Column("max_score", sa.Float),
    sa.Column("view", sa.Text),  # JSON: what the student is shown (autograder.service.feedback)
    sa.Column("result", sa.Text),  # JSON: the whole result, for the instructor
    sa.Column("message", sa.Text, nullable=False, default=""),
)


@dataclass
class Attempt:
    id: str
    user: str
    assignment: str
    number: int
    state: str
    day: str
    created: float
    started: float | None
    finished: float | None
    filename: str
    feedback: str
    score: float | None
    max_score: float | None
    view: dict | None
    message: str
    secret: str = ""
    notebook: bytes | None = None
    result: dict | None = None


class Refused(Exception):
    """An attempt the budget or the rate limit does not allow: `message` says why (Chinese, for the student)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def budget_refusal(total_used: int, total: int | None, today_used: int, per_day: int | None) -> str | None:
    """Why the budget allows no further attempt (Chinese, for the student), or None."""
    if total is not None and total_used >= total:
        return f"这份作业的练习评分次数已用完（共 {total} 次）"
    if per_day is not None and today_used >= per_day:
        return f"今天这份作业的练习评分次数已用完（每天 {per_day} 次），明天再试"
    return None


def _attempt(row, full: bool = False) -> Attempt:
    m = row._mapping
    return Attempt(m["id"], m["user"], m["assignment"], m["number"], m["state"], m["day"], m["created"],
                   m["started"], m["finished"], m["filename"], m["feedback"], m["score"], m["max_score"],
                   json.loads(m["view"]) if m["view"] else None, m["message"] or "",
                   m["secret"] if full else "", m["notebook"] if full else None,
                   json.loads(m["result"]) if full and m["result"] else None)


_LIGHT = [c for c in attempts.c if c.name not in ("notebook", "result", "secret")]


class Store:
    def __init__(self, url: str):
        self.url = url
        self.engine = sa.create_engine(url, future=True, pool_pre_ping=True)
        if self.engine.dialect.name == "sqlite":
            @sa.event.listens_for(self.engine, "connect")
            def _pragmas(connection, _):  # durable before acknowledged; readers do not wait on the grader's writes
                cursor = connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=FULL")
                cursor.execute("PRAGMA busy_timeout=10000")
                cursor.close()
        metadata.create_all(self.engine)
        self._lock = threading.Lock()  # one writer at a time in this process (the web loop and the grading thread)

    def close(self) -> None:
        self.engine.dispose()

    # --- handing in -----------------------------------------------------------------------------------------

    def add(self, user: str, assignment: str, filename: str, notebook: bytes, day: str, feedback: str,
            secret_for, per_day: int | None, total: int | None, rate_per_minute: int, now: float | None = None
            ) -> Attempt:
        """Store a new attempt (committed before this returns), or raise Refused. `secret_for(number)` gives the
        attempt's practice secret from its number."""
        now = time.time() if now is None else now
        with self._lock, self.engine.begin() as db:
            mine = sa.and_(attempts.c.user == user, attempts.c.assignment == assignment)
            counted = sa.and_(mine, attempts.c.state.in_((QUEUED, GRADING, GRADED)))
            recent = db.scalar(sa.select(sa.func.count()).where(attempts.c.user == user,
                                                                attempts.c.created > now - 60))
            if recent >= rate_per_minute:
                raise Refused(f"提交太频繁：每分钟最多 {rate_per_minute} 次，请稍后再试")
            refusal = budget_refusal(db.scalar(sa.select(sa.func.count()).where(counted)), total,
                                     db.scalar(sa.select(sa.func.count()).where(counted, attempts.c.day == day)),
                                     per_day)
            if refusal:
                raise Refused(refusal)
            number = db.scalar(sa.select(sa.func.count()).where(mine)) + 1
            row = {"id": secrets.token_urlsafe(24), "user": user, "assignment": assignment, "number": number,
                   "state": QUEUED, "day": day, "created": now, "filename": filename, "notebook": notebook,
                   "secret": secret_for(number), "feedback": feedback, "message": ""}
            db.execute(attempts.insert().values(**row))
        return self.get(row["id"])

    # --- grading --------------------------------------------------------------------------------------------

    def requeue_interrupted(self) -> int:
        """At start: the attempts that were being graded when the service stopped are queued again."""
        with self._lock, self.engine.begin() as db:
            return db.execute(attempts.update().where(attempts.c.state == GRADING)
                              .values(state=QUEUED, started=None)).rowcount

    def claim(self, limit: int) -> list[Attempt]:
        """The oldest queued attempts (at most `limit`), now being graded."""
        with self._lock, self.engine.begin() as db:
            rows = db.execute(sa.select(attempts).where(attempts.c.state == QUEUED)
                              .order_by(attempts.c.created, attempts.c.id).limit(limit)).all()
            ids = [r.id for r in rows]
            if ids:
                db.execute(attempts.update().where(attempts.c.id.in_(ids)).values(state=GRADING, started=time.time()))
        return [_attempt(r, full=True) for r in rows]

    def finish(self, attempt_id: str, state: str, score: float | None, max_score: float | None, view: dict,
               result: dict | None, message: str = "") -> None:
        with self._lock, self.engine.begin() as db:
            db.execute(attempts.update().where(attempts.c.id == attempt_id).values(
                state=state, finished=time.time(), score=score, max_score=max_score,
                view=json.dumps(view, ensure_ascii=False), result=json.dumps(result, ensure_ascii=False)
                if result is not None else None, message=message))

    # --- reading --------------------------------------------------------------------------------------------

    def get(self, attempt_id: str, full: bool = False) -> Attempt | None:
        with self.engine.connect() as db:
            columns = [attempts] if full else _LIGHT
            row = db.execute(sa.select(*columns).where(attempts.c.id == attempt_id)).first()
        if row is None:
            return None
        return _attempt(row, full) if full else _light(row)

    def position(self, attempt: Attempt) -> int:
        """How many attempts are ahead of this one (0: it is being graded, or next)."""
        with self.engine.connect() as db:
            return db.scalar(sa.select(sa.func.count()).where(
                attempts.c.state.in_(WAITING), attempts.c.id != attempt.id,
                sa.or_(attempts.c.created < attempt.created,
                       sa.and_(attempts.c.created == attempt.created, attempts.c.id < attempt.id))))

    def history(self, user: str | None = None, assignment: str | None = None, limit: int = 10_000) -> list[Attempt]:
        query = sa.select(*_LIGHT).order_by(attempts.c.created.desc()).limit(limit)
        if user is not None:
            query = query.where(attempts.c.user == user)
        if assignment is not None:
            query = query.where(attempts.c.assignment == assignment)
        with self.engine.connect() as db:
            return [_light(r) for r in db.execute(query).all()]

    def used(self, user: str, assignment: str, day: str) -> tuple[int, int]:
        """(attempts counted today, attempts counted in all) for the budget."""
        counted = sa.and_(attempts.c.user == user, attempts.c.assignment == assignment,
                          attempts.c.state.in_((QUEUED, GRADING, GRADED)))
        with self.engine.connect() as db:
            return (db.scalar(sa.select(sa.func.count()).where(counted, attempts.c.day == day)),
                    db.scalar(sa.select(sa.func.count()).where(counted)))

    def waiting(self) -> int:
        with self.engine.connect() as db:
            return db.scalar(sa.select(sa.func.count()).where(attempts.c.state.in_(WAITING)))


def _light(row) -> Attempt:
    m = row._mapping
    return Attempt(m["id"], m["user"], m["assignment"], m["number"], m["state"], m["day"], m["created"],
                   m["started"], m["finished"], m["filename"], m["feedback"], m["score"], m["max_score"],
                   json.loads(m["view"]) if m["view"] else None, m["message"] or "")
