"""The command line for the people who read it (issue 24): choices refused alike by the run and its dry run, the
help in panels with the exit statuses, progress when the output is not a terminal, what Ctrl-C says, and no
command that makes OUT when it has nothing to do there. In process (CliRunner), except one small real run."""

import re

import pytest
from typer.testing import CliRunner

from autograder.cli import app

RUNNER = CliRunner()


def plain(text: str) -> str:
    """The output without the colours and the boxes rich draws around an error (a message spans box lines)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


BAD_CHOICES = [
    ("--late-policy", "per_day"),
    ("--sandbox", "docker"),
    ("--memory-guard", "cgroups"),
    ("--layout", "blackboard"),
    ("--executor", "ray"),
]


@pytest.mark.parametrize("option,value", BAD_CHOICES)
def test_a_bad_choice_is_refused_by_the_run_and_its_dry_run_alike(option, value, tmp_path):
    (tmp_path / "submitted").mkdir()
    args = ["grade", "rmsnorm", "--submissions", str(tmp_path / "submitted"), "--out", str(tmp_path / "out"),
            option, value]
    real, dry = RUNNER.invoke(app, args), RUNNER.invoke(app, [*args, "--dry-run"])
    assert real.exit_code == dry.exit_code == 2, (real.output, dry.output)
    message = plain(real.output)
    assert f"Invalid value for '{option}'" in message and repr(value) in message
    assert plain(dry.output) == message
    assert not (tmp_path / "out").exists()  # refused before anything is made


@pytest.mark.parametrize("command", [["selftest"], ["demo", "--out", "DEMO"], ["bench", "--keep", "DEMO"]])
def test_the_other_commands_refuse_an_unknown_sandbox_tier(command, tmp_path):
    args = [a.replace("DEMO", str(tmp_path / "demo")) for a in command]
    result = RUNNER.invoke(app, [*args, "--sandbox", "docker"])
    assert result.exit_code == 2 and "Invalid value for '--sandbox'" in plain(result.output)
    assert not (tmp_path / "demo").exists()


def test_help_lists_the_choices():
    text = plain(RUNNER.invoke(app, ["grade", "--help"], env={"COLUMNS": "250"}).output)
    for choices in ("none|fixed|percent_per_hour|percent_per_day", "bubblewrap|landlock|rlimits",
                    "auto|cgroup|watchdog", "auto|nbgrader|flat|canvas|moodle", "local|dask"):
        assert choices in text


@pytest.mark.parametrize("args,fragment", [
    (["--late-policy", "fixed", "--late-points", "-3"], "points"),
    (["--exchange", "EXCHANGE"], "--exchange needs the course id"),
])
def test_a_dry_run_refuses_the_settings_the_run_refuses(args, fragment, tmp_path):
    from conftest import release_notebook

    (tmp_path / "submitted").mkdir()
    (tmp_path / "submitted" / "alice.ipynb").write_bytes(release_notebook("rmsnorm").read_bytes())
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "nbgrader_config.py").write_text("c = get_config()\n")  # nothing set: the options alone
    command = ["grade", "rmsnorm", "--submissions", str(tmp_path / "submitted"), "--out", str(tmp_path / "out"),
               "--course", str(tmp_path / "course"), *[a.replace("EXCHANGE", str(tmp_path)) for a in args]]
    real, dry = RUNNER.invoke(app, command), RUNNER.invoke(app, [*command, "--dry-run"])
    assert real.exit_code == dry.exit_code == 2, (real.output, dry.output)
    assert fragment in plain(real.output) and plain(dry.output) == plain(real.output)


def test_grade_help_is_in_panels_without_type_labels_and_ends_with_the_exit_statuses():
    from autograder import cli

    raw = RUNNER.invoke(app, ["grade", "--help"], env={"COLUMNS": "250"}).output
    panels = re.findall(r"╭─ (.+?) ─", raw)
    assert panels == ["Arguments", cli.PANEL_WHAT, cli.PANEL_WHERE, cli.PANEL_POLICY, cli.PANEL_LIMITS,
                      cli.PANEL_SANDBOX, cli.PANEL_SCALE, "Help"]
    for option, panel in (("--submissions", cli.PANEL_WHAT), ("--out", cli.PANEL_WHERE),
                          ("--late-policy", cli.PANEL_POLICY), ("--cell-timeout", cli.PANEL_LIMITS),
                          ("--sandbox", cli.PANEL_SANDBOX), ("--workers", cli.PANEL_SCALE)):
        assert option in raw.split(f"╭─ {panel} ─", 1)[1].split("╰", 1)[0], (option, panel)
    text = plain(raw)
    assert "<bool>" not in text and "<list[" not in text
    assert "--student ID" in text and "--force Regrade" in text
    statuses = text.split("Exit status", 1)[1]
    for code in ("0 grading ran", "1 nothing to grade", "2 bad use", "3 every result is written", "130 interrupted"):
        assert code in statuses
    for command in (["--help"], ["selftest", "--help"], ["report", "--help"], ["bench", "--help"]):
        other = plain(RUNNER.invoke(app, command, env={"COLUMNS": "250"}).output)
        assert "Usage:" in other and "<bool>" not in other and "<list[" not in other, command


def test_progress_lines_when_the_output_is_not_a_terminal(monkeypatch):
    import io
    import time

    from autograder import progress

    monkeypatch.setenv(progress.ENV, "0.5")
    assert progress.default_interval() == 0.5
    monkeypatch.setenv(progress.ENV, "soon")
    assert progress.default_interval() == progress.DEFAULT_INTERVAL
    log = io.StringIO()
    with progress.Progress(4, "grading", 0.5, stream=log) as advance:
        advance("alice/rmsnorm")
        deadline = time.monotonic() + 30  # two lines, however slowly a loaded machine wakes the printer
        while log.getvalue().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    lines = log.getvalue().splitlines()
    assert len(lines) >= 2 and all(re.fullmatch(r"grading: 1/4 done \(25%\), \d+:\d\d elapsed, last: alice/rmsnorm", line)
                                   for line in lines), lines
    quiet = io.StringIO()
    with progress.Progress(4, "grading", 0, stream=quiet) as advance:  # 0: no lines
        advance("alice/rmsnorm")
        time.sleep(0.6)
    assert quiet.getvalue() == ""


def test_selftest_shows_progress(monkeypatch):
    import time

    from autograder.results import SubmissionResult
    from autograder.tools import selftest

    def graded(submissions, tier=None, both_ways=False, limits=None, on_result=None):
        results = []
        for s in submissions:  # about 3 s in all: some six lines at 0.5 s
            time.sleep(3.0 / len(submissions))
            results.append(SubmissionResult(s.student_id, s.assignment_id, "graded", 1.0, 1.0, [], tier="rlimits"))
            on_result(results[-1])
        return {False: results}

    monkeypatch.setattr(selftest, "grade_plan", graded)
    monkeypatch.setattr(selftest, "judge", lambda job, result: selftest.Verdict(job, True))
    result = RUNNER.invoke(app, ["selftest", "-a", "rmsnorm", "--progress-interval", "0.5"])
    lines = [line for line in result.output.splitlines() if line.startswith("selftest: ")]
    assert len(lines) >= 2 and re.match(r"selftest: \d+/\d+ done \(\d+%\), \d+:\d\d elapsed, last: rmsnorm ", lines[-1])
    assert "submissions graded as expected" in result.output


@pytest.mark.slow
def _sigint_as_from_a_shell():
    """In the child, before exec: SIGINT at its default, as an interactive shell starts a command. A suite
    started in the background of a shell without job control (`bash .ci/run &`, a CI runner) has SIGINT ignored,
    and an ignored signal stays ignored across exec: Python then installs no handler of its own, and the run
    (rightly: like one under nohup, it is not Ctrl-C's to stop) waits for the sleeping cell. Whether it did
    depended on whether an earlier test in the same worker had put Python's handler back."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignores_sigint(pid: int) -> bool:
    import signal

    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    raise AssertionError(f"no SigIgn line for {pid}")


def test_ctrl_c_keeps_what_was_graded_and_says_how_to_go_on_with_progress_in_the_log(tmp_path):
    """One small real run into a log file (not a terminal): progress lines every 0.5 s; Ctrl-C (SIGINT to the
    run's process group, as a terminal sends it) while the last submission sleeps in a cell: exit 130, one line
    with what is kept and how to go on, and the two finished results kept."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import nbformat

    from conftest import release_notebook, source_notebook
    from hostile.watch import leftover_pool_processes

    sub = tmp_path / "submitted"
    sub.mkdir()
    (sub / "a1.ipynb").write_bytes(source_notebook("rmsnorm").read_bytes())
    (sub / "a2.ipynb").write_bytes(release_notebook("rmsnorm").read_bytes())
    sleeper = nbformat.read(release_notebook("rmsnorm"), as_version=4)
    sleeper.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(150)"))
    nbformat.write(sleeper, sub / "zz.ipynb")  # graded last (one worker, in the order found)
    out, log = tmp_path / "out", tmp_path / "log.txt"
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    env.pop(  # the interval is the option's, not the environment's
        "AUTOGRADE_PROGRESS_INTERVAL", None)
    with open(log, "w") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "grade", "rmsnorm", "--submissions", str(sub),
                                 "--out", str(out), "--workers", "1", "--cell-timeout", "200", "--probe-timeout", "8",
                                 "--progress-interval", "0.5"], env=env, stdout=stdout, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, preexec_fn=_sigint_as_from_a_shell)
    try:
        assert not _ignores_sigint(proc.pid)  # as a terminal starts it: Ctrl-C is not ignored
        deadline = time.monotonic() + 300
        while "grading: 2/3 done" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert "grading: 2/3 done" in log.read_text(), log.read_text()[-2000:]
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr[-2000:]
    said = [line for line in stderr.splitlines() if line.startswith("interrupted:")]
    assert said == [f"interrupted: 2 graded by this run, 2 result(s) kept in {out / 'results'}; run the same command "
                    "again (with or without --resume) to grade the rest: what is kept is not graded again"], stderr
    kept = sorted(p.parent.name for p in (out / "results").glob("*/*.json"))
    assert kept == ["a1", "a2"]
    assert {json.loads(p.read_text())["status"] for p in (out / "results").glob("*/*.json")} == {"graded"}
    progress = [line for line in log.read_text().splitlines() if line.startswith("grading: ")]
    assert len(progress) >= 2 and "Traceback" not in stderr
    time.sleep(1)
    assert leftover_pool_processes() == {}


def test_no_command_makes_out_when_it_has_nothing_to_do_there(tmp_path):
    from conftest import release_notebook

    missing = tmp_path / "no" / "such" / "out"
    (tmp_path / "lms.csv").write_text("Student,ID\n")
    for args, code, fragment in [
        (["report", "--out", str(missing)], 1, "no stored results"),
        (["forget", "alice", "rmsnorm", "--out", str(missing)], 1, "no stored result of alice/rmsnorm"),
        (["forget", "alice", "rmsnorm", "--out", str(missing), "--dry-run"], 1, "no stored result"),
        (["lms-grades", "rmsnorm", "--lms-gradebook", str(tmp_path / "lms.csv"), "--out", str(missing)], 1,
         "no stored results of rmsnorm"),
    ]:
        result = RUNNER.invoke(app, args)
        assert result.exit_code == code and fragment in plain(result.output), (args, result.output)
        assert not (tmp_path / "no").exists(), args
    (missing / "results").mkdir(parents=True)  # an OUT of no results, and a course folder that is not there
    result = RUNNER.invoke(app, ["report", "--out", str(missing), "--course", str(tmp_path / "course")])
    assert result.exit_code == 2 and "no such folder" in plain(result.output)
    assert not (tmp_path / "course").exists() and sorted(p.name for p in missing.iterdir()) == ["results"]

    empty = tmp_path / "empty"
    empty.mkdir()
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(empty), "--out", str(tmp_path / "o1" / "o")])
    assert result.exit_code == 1 and "no submissions" in plain(result.output)
    (empty / "alice.ipynb").write_bytes(release_notebook("rmsnorm").read_bytes())
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(empty), "--out", str(tmp_path / "o2"),
                                 "--dry-run"])
    assert result.exit_code == 0 and "1 submission(s) would be graded" in result.output, result.output
    existing = tmp_path / "o3"
    existing.mkdir()
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(empty), "--out", str(existing), "--dry-run"])
    assert result.exit_code == 0 and existing.is_dir()  # a folder that was there stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "lms.csv", "no", "o3"]


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
@pytest.mark.parametrize("command", [["grade", "rmsnorm", "--submissions", "SUB", "--out", "OUT"],
                                     ["grade", "rmsnorm", "--submissions", "SUB", "--out", "OUT", "--dry-run"],
                                     ["bench", "--keep", "OUT"], ["demo", "--out", "OUT"]])
def test_a_bad_workers_default_from_the_environment_is_refused_before_anything_is_made(command, value, tmp_path):
    (tmp_path / "submitted").mkdir()
    args = [a.replace("SUB", str(tmp_path / "submitted")).replace("OUT", str(tmp_path / "out")) for a in command]
    result = RUNNER.invoke(app, args, env={"AUTOGRADE_WORKERS": value})
    assert result.exit_code == 2, result.output
    assert "$AUTOGRADE_WORKERS must be a whole number >= 1" in plain(result.output) and repr(value) in plain(result.output)
    assert not (tmp_path / "out").exists()


def test_the_workers_default_is_the_environment_s_else_the_cores(monkeypatch):
    import os

    from autograder.jobs.executors import default_workers

    monkeypatch.setenv("AUTOGRADE_WORKERS", "3")
    assert default_workers() == 3
    monkeypatch.delenv("AUTOGRADE_WORKERS")
    assert default_workers() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("AUTOGRADE_WORKERS", " ")  # blank: not set
    assert default_workers() == len(os.sched_getaffinity(0))
