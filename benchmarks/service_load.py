"""Load on the students' practice-grading service (`autograde serve`): a real JupyterHub on 127.0.0.1 (tests/hub.py:
the dummy authenticator, configurable-http-proxy from .hub-proxy/) runs the service as a managed service; N students,
each with their own hub token, hand in one notebook each at random moments within --spread seconds (a mix of
correct, wrong and broken notebooks over two assignments), through the hub's proxy, as autograde_submit.py does.
It waits until every acknowledged attempt is graded, then checks each through the API as its student.

    python benchmarks/service_load.py --students 50
    python benchmarks/service_load.py --students 200 --workers 2

Last line:

    service: N attempts, L lost, p95 S s from submit to report, max queue Q

lost: handed in but not acknowledged (anything but 202: a refusal, a 5xx, a dropped connection), or acknowledged and
not graded by the end (still waiting after --timeout, or given back as the service's own failure), or answered to
its student as anything but their own graded attempt. "submit to report": from the moment the student's POST was
sent to the moment the service stored the report (its `finished` time); max queue: the most attempts waiting
(queued or being graded) at once, sampled every 0.2 s from the service's store.
"""

import argparse
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from grading_helpers import edited_notebook  # noqa: E402
from hub import local_session, running_hub  # noqa: E402

from autograder.examples import mistakes  # noqa: E402
from autograder.service.practice import practice_secret  # noqa: E402


def notebooks(folder: Path) -> list[tuple[str, str, bytes]]:
    """(kind, assignment, bytes): correct, wrong (a catalogued mistake), broken (a syntax error where the mistake's
    line is)."""
    out = []
    for assignment in ("rmsnorm", "swiglu"):
        out.append(("correct", assignment, edited_notebook(assignment, [], folder / f"{assignment}.ipynb").read_bytes()))
        wrong = mistakes(assignment)[0]
        out.append(("wrong", assignment, edited_notebook(assignment, wrong.edits,
                                                         folder / "wrong" / f"{assignment}.ipynb").read_bytes()))
        out.append(("broken", assignment, edited_notebook(assignment, [(wrong.edits[0][0], "return (  # unfinished")],
                                                          folder / "broken" / f"{assignment}.ipynb").read_bytes()))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--spread", type=float, default=60.0, help="hand-ins at random moments within this many s")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many s")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="service-load-") as tmp:
        tmp = Path(tmp)
        course = tmp / "course"
        course.mkdir()
        (course / "nbgrader_config.py").write_text("c = get_config()\nc.AutogradeService.attempts_per_day = 5\n")
        kinds = notebooks(tmp / "nb")
        students = [f"student{i:04d}" for i in range(args.students)]
        plan = {s: kinds[i % len(kinds)] for i, s in enumerate(students)}
        service = {"name": "autograde",
                   "command": [sys.executable, "-m", "autograder.cli", "serve", "--course", str(course),
                               "--workers", str(args.workers)],
                   "environment": {"AUTOGRADE_PRACTICE_SECRET": practice_secret(secrets.token_hex(32).encode())
                                   .decode()}}
        with running_hub(tmp / "hub", services=[service], users=students) as hub:
            tokens = {s: hub.user_token(s) for s in students}
            base = hub.service_url("autograde")
            db_path = course / "service.sqlite"
            max_queue, stop = 0, threading.Event()

            def sample():
                nonlocal max_queue
                while not stop.is_set():
                    if db_path.exists():
                        db = sqlite3.connect(db_path, timeout=10)
                        try:
                            waiting = db.execute("select count(*) from attempts where state in ('queued', 'grading')"
                                                 ).fetchone()[0]
                            max_queue = max(max_queue, waiting)
                        except sqlite3.OperationalError:
                            pass
                        finally:
                            db.close()
                    time.sleep(0.2)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            moments = sorted(rng.uniform(0, args.spread) for _ in students)
            start = time.monotonic() + 1
            sent: dict[str, float] = {}
            acked: dict[str, str] = {}
            lost: list[str] = []

            def hand_in(student: str, moment: float) -> None:
                time.sleep(max(0.0, start + moment - time.monotonic()))
                kind, assignment, content = plan[student]
                sent[student] = time.time()
                try:
                    with local_session() as session:
                        reply = session.post(f"{base}api/attempts?assignment={assignment}&filename={assignment}.ipynb",
                                             data=content, headers={"Authorization": f"token {tokens[student]}"},
                                             timeout=120)
                except Exception as exc:  # a dropped connection is a lost attempt
                    lost.append(f"{student}: {type(exc).__name__}: {exc}")
                    return
                if reply.status_code != 202:
                    lost.append(f"{student}: {reply.status_code} {reply.text[:200]}")
                else:
                    acked[student] = reply.json()["id"]

            order = list(students)
            rng.shuffle(order)
            with ThreadPoolExecutor(max_workers=min(64, len(students))) as pool:
                list(pool.map(hand_in, order, moments))
            handed_in = time.monotonic() - start
            deadline = time.monotonic() + args.timeout
            while True:
                db = sqlite3.connect(db_path, timeout=10)
                waiting = db.execute("select count(*) from attempts where state in ('queued', 'grading')").fetchone()[0]
                db.close()
                if waiting == 0 or time.monotonic() > deadline:
                    break
                time.sleep(1)
            stop.set()
            sampler.join()
            db = sqlite3.connect(db_path, timeout=10)
            rows = {r[0]: r[1:] for r in db.execute("select id, user, state, finished, score from attempts")}
            db.close()
            latencies, by_kind = [], {}
            with local_session() as session:
                for student, attempt_id in acked.items():
                    user, state, finished, score = rows.get(attempt_id, (None, None, None, None))
                    answer = session.get(f"{base}api/attempts/{attempt_id}", timeout=60,
                                         headers={"Authorization": f"token {tokens[student]}"})
                    seen = answer.json() if answer.status_code == 200 else {}
                    if user != student or state != "graded" or seen.get("state") != "graded" \
                            or seen.get("id") != attempt_id:
                        lost.append(f"{student}: {state} (API: {answer.status_code} {seen.get('state')})")
                        continue
                    latencies.append(finished - sent[student])
                    by_kind.setdefault(plan[student][0], []).append(score)
        p95 = statistics.quantiles(latencies, n=20)[18] if len(latencies) >= 2 else (latencies or [0])[0]
        for kind, scores in sorted(by_kind.items()):
            print(f"  {kind}: {len(scores)} graded, scores {min(scores):g}..{max(scores):g}")
        for line in lost[:20]:
            print(f"  lost: {line}")
        if latencies:
            print(f"  handed in over {handed_in:.0f} s; submit to report: median {statistics.median(latencies):.1f} s, "
                  f"max {max(latencies):.1f} s; {args.workers} worker(s)")
        print(f"service: {len(students)} attempts, {len(lost)} lost, p95 {p95:.1f} s from submit to report, "
              f"max queue {max_queue}")
        return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
