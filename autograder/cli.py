"""The `autograde` command line: a thin layer over the Python API."""

import os

import typer

from autograder import __version__, sync_solutions

app = typer.Typer(
    help="Grade the chapter's six assignments (rmsnorm, gqa_saving, gradient_flow, rope, swiglu, mla).",
    no_args_is_help=True,
    add_completion=False,
)


@app.command("sync-solutions")
def sync_solutions_command(
    check: bool = typer.Option(False, "--check", help="Only report cells that differ; exit 1 if any do."),
):
    """Rewrite the solution cells of assignments/ from the reference code in solutions/."""
    raise typer.Exit(sync_solutions.main(["--check"] if check else []))


@app.command("sandbox-setup")
def sandbox_setup():
    """Build the sandbox's own Python environment (torch, numpy, matplotlib; nothing of the course)."""
    from autograder.sandbox import environment, tiers

    env = environment.build()
    typer.echo(f"sandbox environment: {env.python} with {env.site}")
    probe_uid = 65534 if os.geteuid() == 0 else None
    typer.echo(f"isolation tiers that work here: {', '.join(tiers.available(probe_uid))}")


@app.command()
def version():
    """Print the grader version."""
    typer.echo(__version__)


def main():
    app()
