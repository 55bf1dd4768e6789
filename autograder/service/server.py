"""`autograde serve`: the service's process, started by JupyterHub as a managed service (or by hand, as an external
one). JupyterHub gives it, in the environment, its token (JUPYTERHUB_API_TOKEN), where to listen
(JUPYTERHUB_SERVICE_URL) and its prefix (JUPYTERHUB_SERVICE_PREFIX: /services/<name>/), and HubOAuth reads the
rest of the OAuth set-up from there.

The practice secret comes from $AUTOGRADE_PRACTICE_SECRET or --practice-secret-file (`autograde practice-secret`
prints it); the course secret is never read here.
"""

import logging
import os
import secrets
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger("autograde.service")


class ServiceError(Exception):
    """The service cannot start: the message says why."""


@dataclass
class ServeOptions:
    course: Path = Path(".")
    db_url: str | None = None  # None: sqlite in the course folder (service.sqlite)
    workers: int = 2
    scheduler: str | None = None  # a Dask scheduler's address: grade there
    practice_secret_file: Path | None = None
    listen: str | None = None  # http://127.0.0.1:PORT; None: $JUPYTERHUB_SERVICE_URL
    prefix: str | None = None  # None: $JUPYTERHUB_SERVICE_PREFIX


def read_practice_secret(path: Path | None) -> bytes:
    text = os.environ.get("AUTOGRADE_PRACTICE_SECRET", "")
    if path is not None:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise ServiceError(f"{path}: cannot read the practice secret: {exc.strerror}") from None
    text = text.strip()
    if len(text) < 32 or any(c not in "0123456789abcdef" for c in text):
        raise ServiceError("no practice secret: set AUTOGRADE_PRACTICE_SECRET (or --practice-secret-file) to what "
                           "`autograde practice-secret` prints in the course folder")
    return text.encode()


def deadlines(course: Path, ttl: float = 30.0):
    """(assignment, user) -> the due date plus the user's extension (naive UTC), from the course's gradebook.db,
    each read kept `ttl` seconds; None where the gradebook sets no due date."""
    path = Path(course) / "gradebook.db"
    cache: dict = {}

    def due(assignment_id: str, user: str) -> datetime | None:
        hit = cache.get((assignment_id, user))
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        value = None
        if path.is_file():
            from autograder.recording.gradebook import CourseGradebook

            gb = CourseGradebook(path)
            try:
                value = gb.due_date(assignment_id)
                extension = gb.extension(assignment_id, user) if value is not None else None
                if extension:
                    value = value + extension
            finally:
                gb.close()
        if len(cache) > 100_000:
            cache.clear()
        cache[(assignment_id, user)] = (time.monotonic() + ttl, value)
        return value

    return due


# the service's local workers stay warm between its batches (a few attempts each), each retired after this many
KEEP_WARM = 500


def build(options: ServeOptions):
    """The store, the settings, the grading loop and the tornado application, ready to start."""
    from dateutil.tz import gettz

    from autograder.assignments import assignment_ids
    from autograder.intake.handin import HandInError, submission_timeout
    from autograder.jobs.executors import Executor
    from autograder.reporting.formatting import assignment_info
    from autograder.running.jobs import GradingOptions
    from autograder.running.sandbox.limits import Limits
    from autograder.service.app import ServiceState, make_app
    from autograder.service.grading import GradingLoop
    from autograder.service.practice import attempt_secret
    from autograder.service.settings import ServiceSettingsError, load_service_settings
    from autograder.service.store import Store

    course = Path(options.course).resolve()
    if not course.is_dir():
        raise ServiceError(f"{course}: no such course folder")
    practice = read_practice_secret(options.practice_secret_file)
    ids = list(assignment_ids())
    try:
        settings = load_service_settings(course, ids)
        budget = submission_timeout(course)
    except (ServiceSettingsError, HandInError) as exc:
        raise ServiceError(str(exc)) from None
    store = Store(options.db_url or f"sqlite:///{course / 'service.sqlite'}")
    executor = Executor("dask", workers=options.workers, scheduler=options.scheduler) if options.scheduler \
        else Executor("local", workers=options.workers, keep_warm=KEEP_WARM)
    grading = GradingOptions(limits=Limits(submission_timeout=budget), secret=practice)
    loop = GradingLoop(store, settings, grading, executor)
    zone = gettz(settings.display.timezone)

    def today() -> str:
        return datetime.now(zone).date().isoformat()

    def secret_for(assignment_id: str, user: str, number: int, day: str) -> str:
        rotation = settings.policy(assignment_id).practice_inputs
        return attempt_secret(practice, rotation, number, datetime.fromisoformat(day).date()).decode()

    state = ServiceState(store, settings, loop, ids, {a: assignment_info(a).title for a in ids}, deadlines(course),
                         secret_for, today)
    prefix = options.prefix or os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/services/autograde/")
    cookie_secret = os.environ.get("JUPYTERHUB_COOKIE_SECRET", "").encode() or secrets.token_bytes(32)
    return state, make_app(state, prefix, cookie_secret)


def serve(options: ServeOptions) -> int:
    from tornado import httpserver, ioloop

    from autograder.intake.reading import MAX_NOTEBOOK_BYTES

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s autograde-service %(levelname)s %(message)s")
    for name in ("autograde", "tornado.access"):  # ours and each request; not every library's INFO
        logging.getLogger(name).setLevel(logging.INFO)
    listen = options.listen or os.environ.get("JUPYTERHUB_SERVICE_URL")
    if not listen:
        raise ServiceError("where to listen: run as a JupyterHub service (it sets JUPYTERHUB_SERVICE_URL) or pass "
                           "--listen http://127.0.0.1:PORT")
    url = urlsplit(listen)
    state, app = build(options)
    # an upload over the cap is refused from its Content-Length, before its body is read
    server = httpserver.HTTPServer(app, max_body_size=MAX_NOTEBOOK_BYTES + 1024**2, xheaders=True)
    server.listen(url.port or 80, url.hostname or "127.0.0.1")
    state.loop.start()
    loop = ioloop.IOLoop.current()

    def stop(*_):
        loop.add_callback_from_signal(loop.stop)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("listening on %s; %d attempt(s) waiting", listen, state.store.waiting())
    try:
        loop.start()
    finally:
        server.stop()
        state.loop.stop()
        state.store.close()
    return 0
