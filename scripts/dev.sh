#!/usr/bin/env bash
# Entry points for a fresh machine. Each sets up what it needs first (idempotent), then runs:
#   bash scripts/dev.sh demo       # build the bundled example class and grade it (the main job)
#   bash scripts/dev.sh generate   # nbgrader generate_assignment for all seven -> release/, and the students' checker
#   bash scripts/dev.sh test       # the test suite (what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv

setup() {
    local python=${PYTHON:-}
    if [ -z "$python" ]; then
        for candidate in python3.11 python3; do
            if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
                python=$candidate
                break
            fi
        done
    fi
    [ -n "$python" ] || { echo "error: Python 3.11 not found; set PYTHON=/path/to/python3.11" >&2; exit 1; }
    [ -x "$VENV/bin/python" ] || "$python" -m venv "$VENV"
    # torch first, pinned: the CPU build 2.13.0; everything after it is installed with the constraints file
    # that pins it (environment/constraints.txt), so nothing that depends on torch can replace it; the test
    # extra brings transformers==5.23.0 (only tests/test_llama_cross_check.py imports it); the service extra brings
    # jupyterhub==5.4.6 (`autograde serve` and tests/hub.py)
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check torch==2.13.0
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c environment/constraints.txt \
        -e ".[test,dask,service]"
    # the course's own modules compiled once (an editable install leaves them as source, and where
    # PYTHONDONTWRITEBYTECODE is set no run would ever write them): each process of a run, the CLI and every
    # worker, loads them instead of compiling them anew (~0.2 s of CPU a run); a source newer than its
    # compiled copy is compiled again as ever
    "$VENV/bin/python" -m compileall -q -j 0 autograder solutions >/dev/null
    export PATH="$PWD/$VENV/bin:$PATH"  # nbgrader runs `alembic` from PATH
    # the sandbox: bubblewrap from Debian, and its own torch-only Python environment
    if ! command -v bwrap >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
        else
            echo "warning: bubblewrap is not installed (sudo apt-get install bubblewrap); the grader falls back to Landlock" >&2
        fi
    fi
    browser
    hub_proxy
    postgres
    autograde sandbox-setup
    student_tools
    student_wheelhouse
}

# tests/test_student_check.py installs the students' checker in a fresh venv as a student would (torch==2.13.0
# first, then environment/student-requirements.txt) without the network: from these wheels, fetched here once
# per version of the requirements (pip wheel of the same requirements, under the torch constraint).
WHEELHOUSE=$VENV/student-wheelhouse
student_wheelhouse() {
    local stamp
    stamp="$WHEELHOUSE/.built-$(cat environment/student-requirements.txt environment/constraints.txt | sha256sum | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    rm -rf "$WHEELHOUSE"
    "$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check -w "$WHEELHOUSE" \
        -c environment/constraints.txt torch==2.13.0 -r environment/student-requirements.txt
    touch "$stamp"
}

# The browser tests (reports, the summary, formgrader's pages) drive Debian's chromium headless; fonts-noto-cjk
# draws the Chinese, libjs-mathjax stands in for the MathJax formgrader's page loads from a CDN (the tests go
# nowhere off the machine). Only Debian's packages, installed as root; otherwise a warning and the tests skip
# (.ci/run sets AUTOGRADE_REQUIRE_BROWSER=1: there they fail instead).
BROWSER_PACKAGES="chromium fonts-noto-cjk libjs-mathjax"
browser() {
    local missing=()
    command -v chromium >/dev/null || missing+=(chromium)
    [ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || missing+=(fonts-noto-cjk)
    [ -f /usr/share/javascript/mathjax/MathJax.js ] || missing+=(libjs-mathjax)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $BROWSER_PACKAGES >/dev/null
    else
        echo "warning: ${missing[*]} not installed (sudo apt-get install $BROWSER_PACKAGES); the browser tests skip" >&2
    fi
}

# The hub tests (tests/hub.py) start a real JupyterHub, and JupyterHub's proxy is a Node program that pip does not
# install: configurable-http-proxy, exactly this version, from npm into .hub-proxy/ (git-ignored; tests/hub.py runs
# .hub-proxy/node_modules/.bin/configurable-http-proxy). The machine's node and npm as they are (the proxy asks for
# Node >= 10); without npm a warning and the hub tests skip (.ci/run sets AUTOGRADE_REQUIRE_HUB=1: they fail there).
# Idempotent: nothing to do when the installed proxy reports this version.
HUB_PROXY_VERSION=4.6.3
HUB_PROXY=.hub-proxy
hub_proxy() {
    local bin="$HUB_PROXY/node_modules/.bin/configurable-http-proxy"
    if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "$HUB_PROXY_VERSION" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
        echo "warning: node/npm not installed; configurable-http-proxy@$HUB_PROXY_VERSION is missing and the hub tests skip" >&2
        return 0
    fi
    # --no-save: no package.json or lock file is written into .hub-proxy/ (the version is pinned here)
    npm install --prefix "$HUB_PROXY" --no-audit --no-fund --no-save --loglevel=error \
        "configurable-http-proxy@$HUB_PROXY_VERSION" >/dev/null
    [ "$("$bin" --version)" = "$HUB_PROXY_VERSION" ] || { echo "error: $bin is not version $HUB_PROXY_VERSION" >&2; exit 1; }
}

# The service's store on PostgreSQL (tests/test_service_parts.py starts a server of its own from Debian's binaries,
# /usr/lib/postgresql/<version>/bin, as the postgres user): Debian's postgresql, installed as root; otherwise a
# warning and that test skips (.ci/run: it fails). Installing the package also starts Debian's own cluster, which
# the test does not use.
postgres() {
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
        echo "warning: postgresql is not installed (sudo apt-get install postgresql); the PostgreSQL store test skips" >&2
    fi
}

# The exchange round-trip test (tests/test_exchange_roundtrip.py) runs `nbgrader fetch_assignment`,
# `submit` and `fetch_feedback` as real student users, who cannot run this venv's Python (it may live
# under a private home). They get the same nbgrader for Debian's /usr/bin/python3.11 in a world-readable
# folder: PYTHONPATH=/opt/autograde/student-tools /usr/bin/python3.11 -m nbgrader ... Only as root (the
# test creates users, so it runs only as root); idempotent (a marker per nbgrader version).
STUDENT_TOOLS=/opt/autograde/student-tools
student_tools() {
    [ "$(id -u)" = 0 ] && [ -x /usr/bin/python3.11 ] || return 0
    local version
    version=$("$VENV/bin/python" -c 'import nbgrader; print(nbgrader.__version__)')
    [ -f "$STUDENT_TOOLS/.nbgrader-$version" ] && return 0
    local tmp="$STUDENT_TOOLS.tmp.$$"
    rm -rf "$tmp"
    /usr/bin/python3.11 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --target "$tmp" "nbgrader==$version"
    touch "$tmp/.nbgrader-$version"
    chmod -R a+rX "$tmp"
    rm -rf "$STUDENT_TOOLS.old.$$"
    [ -e "$STUDENT_TOOLS" ] && mv "$STUDENT_TOOLS" "$STUDENT_TOOLS.old.$$"
    mv "$tmp" "$STUDENT_TOOLS"
    rm -rf "$STUDENT_TOOLS.old.$$"
}

case "${1:-}" in
    demo)
        setup
        shift
        autograde demo "$@"
        ;;
    generate)
        setup
        # the assignments are the source notebooks with a record (autograder/assignments.py)
        for assignment in $(python -m autograder.assignments); do
            nbgrader generate_assignment "$assignment" --force --log-level=WARN
            test -s "release/$assignment/$assignment.ipynb" || { echo "error: release/$assignment not written" >&2; exit 1; }
        done
        # the checker and the requirements next to each notebook, in assignments/<id>/ and release/<id>/
        autograde student-checker
        echo "Student notebooks written to release/<assignment>/<assignment>.ipynb, with check_notebook.py, student-requirements.txt and autograde_submit.py"
        ;;
    test)
        setup
        shift
        # lint first: pyflakes' rules (F, pyproject.toml) with zero findings, or the run fails here
        python -m ruff check --select F --no-cache autograder solutions tests benchmarks scripts
        # three test workers on two cores: much of the suite waits (timeouts of hostile cases, sandboxes and
        # servers starting, browsers), about 12% of the CPU stayed idle with two; measured 893 s with two, 850 s
        # with three (on a slower machine, one OpenMP thread per test process: 1040 s with two, 1083 s with three,
        # within a run's spread). A test file stays on one worker, its fixtures shared; the longest files start first
        # (tests/conftest.py); the slowest tests are listed at the end. A test (its fixtures included) that runs
        # past 15 minutes fails with its stack (pytest-timeout), and the run goes on: a hang costs one test, never
        # the run (the longest test takes about 4 minutes on a quiet 2-core machine)
        python -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder --durations=25 \
            --timeout "${PYTEST_TIMEOUT:-900}" "$@"
        ;;
    *)
        echo "usage: bash scripts/dev.sh {demo|generate|test} [args...]" >&2
        exit 2
        ;;
esac
