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
