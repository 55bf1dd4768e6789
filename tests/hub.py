"""A real JupyterHub on 127.0.0.1 for the tests of a hub service (`autograde serve`): the hub, its proxy
(configurable-http-proxy) and the managed services it starts, all subprocesses, gone when the context ends.

    from hub import running_hub

    with running_hub(tmp_path, services=[{"name": "grader", "command": [...]}], users=["alice", "bob"],
                     groups={"instructors": ["bob"]}) as hub:
        session = hub.login("alice")                    # through the hub's login form
        session.get(hub.service_url("grader"))          # follows the hub's OAuth redirects: alice's cookie for the service
        token = hub.user_token("alice")                 # an API token of alice's (what her own server would hold)

Nothing is spawned for a user (no single-user servers); users log in with JupyterHub's DummyAuthenticator and one
password (`hub.password`). The hub's, the proxy's and the services' output go to one log (`hub.log_text()`).

What a managed service gets (JupyterHub 5.4.6, read in its source: app.py, services/service.py, apihandlers/auth.py,
scopes.py):
- its environment from the hub: JUPYTERHUB_SERVICE_NAME, JUPYTERHUB_SERVICE_URL (the address to listen on: the `url`
  of its definition, which running_hub fills in with a free 127.0.0.1 port when none is given),
  JUPYTERHUB_SERVICE_PREFIX (/services/<name>/), JUPYTERHUB_API_URL, JUPYTERHUB_API_TOKEN, JUPYTERHUB_CLIENT_ID
  (service-<name>), JUPYTERHUB_OAUTH_CALLBACK_URL (/services/<name>/oauth_callback), JUPYTERHUB_OAUTH_ACCESS_SCOPES,
  plus the hub's own PATH, PYTHONPATH, LANG... (Spawner.env_keep) and the `environment` of its definition. That is
  all `jupyterhub.services.auth.HubOAuth()` reads: it needs no configuration of its own.
- an OAuth client, because it has a `url`. A user may finish the OAuth only with the scope
  `access:services!service=<name>`, which JupyterHub's default `user` role (scope `self`) does NOT hold: without it
  the hub's authorize page answers 403 "You do not have permission to access JupyterHub service <name>", and a user's
  API token is refused by HubAuthenticated handlers (they require $JUPYTERHUB_OAUTH_ACCESS_SCOPES, i.e. that same
  scope). running_hub therefore redefines the `user` role as `self` + access to every service it was given.
- the user's name and groups: every token may read its owner's `read:users:name` and `read:users:groups`
  (scopes.identify_scopes, added by GET /hub/api/user, which HubAuth calls), so the model a service sees has "groups"
  with no oauth_client_allowed_scopes at all. (`oauth_roles` is deprecated since 3.0; `oauth_client_allowed_scopes`
  is only for a service that acts on the user's behalf at the hub's API.)
- no confirmation page: by default the hub asks each user once to "Authorize access" for a service; the service
  definition's `oauth_no_confirm: True` (running_hub's default) skips it, the hub logs a warning saying so.

Without the proxy (installed from npm by scripts/dev.sh into .hub-proxy/) or jupyterhub (the `service` extra) the tests
skip, unless AUTOGRADE_REQUIRE_HUB=1 (set by .ci/run): then they fail.
"""

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parent.parent
PROXY = REPO_ROOT / ".hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
PROXY_VERSION = "4.6.3"  # scripts/dev.sh: HUB_PROXY_VERSION
JUPYTERHUB = Path(sys.executable).parent / "jupyterhub"
REQUIRE = os.environ.get("AUTOGRADE_REQUIRE_HUB") == "1"
START_TIMEOUT = 60.0


def hub_missing() -> str | None:
    """Why a hub cannot be started here, or None."""
    if not JUPYTERHUB.exists():
        return f"jupyterhub is not installed in this venv ({JUPYTERHUB}; pip install -e \".[service]\")"
    if not os.access(PROXY, os.X_OK):
        return f"configurable-http-proxy is not installed at {PROXY} (bash scripts/dev.sh installs it with npm)"
    try:
        version = subprocess.run([str(PROXY), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:  # e.g. no `node` on PATH for its #!/usr/bin/env node
        return f"{PROXY} does not run: {e}"
    if version != PROXY_VERSION:
        return f"{PROXY} is version {version!r}, not {PROXY_VERSION} (bash scripts/dev.sh reinstalls it)"
    return None


def hub_available() -> bool:
    return hub_missing() is None


def require_hub() -> None:
    """Skip the test without a hub (fail instead under AUTOGRADE_REQUIRE_HUB=1, as .ci/run sets)."""
    missing = hub_missing()
    if missing is not None:
        if REQUIRE:
            pytest.fail(missing + "; AUTOGRADE_REQUIRE_HUB=1 makes this a failure")
        pytest.skip(missing)


class HubError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_session() -> requests.Session:
    """A requests session that never uses the environment's HTTP(S)_PROXY: everything here is 127.0.0.1."""
    session = requests.Session()
    session.trust_env = False
    return session


# --- processes (Linux /proc: no psutil needed) -----------------------------------------------------------------

@dataclass(frozen=True)
class Proc:
    pid: int
    start: int  # /proc/<pid>/stat's starttime: a pid reused by a later process is not this process
    cmdline: str

    def alive(self) -> bool:
        info = _stat(self.pid)
        return info is not None and info[1] == self.start and info[2] != "Z"


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, starttime, state) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = text[text.rindex(")") + 2:].split()  # the name, in parentheses, may hold spaces
    return int(fields[1]), int(fields[19]), fields[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(pid: int) -> list[Proc]:
    """Every living process below `pid` (the managed services run in sessions of their own, still its children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _stat(int(entry.name))) is not None:
            children.setdefault(info[0], []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        info = _stat(child)
        if info is not None and info[2] != "Z":
            found.append(Proc(child, info[1], _cmdline(child)))
        todo.extend(children.get(child, []))
    return found


# --- the hub ---------------------------------------------------------------------------------------------------

@dataclass
class Hub:
    url: str  # the public proxy's, e.g. http://127.0.0.1:PORT (no trailing slash)
    hub_api_url: str  # the hub's own API, bypassing the proxy (what services use: JUPYTERHUB_API_URL)
    admin_token: str
    password: str
    dir: Path
    log_path: Path
    services: dict[str, dict] = field(default_factory=dict)  # name -> definition as written to the config
    process: subprocess.Popen | None = None
    # after exit: the processes the hub had started, and those still alive when the hub had exited (then killed)
    started: list[Proc] = field(default_factory=list)
    leftovers: list[Proc] = field(default_factory=list)
    start_seconds: float = 0.0  # from starting jupyterhub to the hub and its services answering

    def service_url(self, name: str) -> str:
        return f"{self.url}/services/{name}/"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, chars: int = 6000) -> str:
        return self.log_text()[-chars:]

    def processes(self) -> dict[str, list[Proc]]:
        """The hub's process and what it runs now: {"hub": [...], "proxy": [...], "<service name>": [...]}."""
        assert self.process is not None
        found = {"hub": [Proc(self.process.pid, _stat(self.process.pid)[1], _cmdline(self.process.pid))],
                 "proxy": [], **{name: [] for name in self.services}}
        for proc in descendants(self.process.pid):
            if "configurable-http-proxy" in proc.cmdline:
                found["proxy"].append(proc)
            for name, spec in self.services.items():
                if proc.cmdline.startswith(" ".join(spec.get("command", [])) or "\0"):
                    found[name].append(proc)
        return found

    # --- HTTP ---

    def api(self, method: str, path: str, token: str | None = None, **kw) -> requests.Response:
        """A request to the hub's REST API through the proxy (path after /hub/api, e.g. "/users"), with the harness's
        admin token unless `token` is given."""
        headers = {"Authorization": f"token {token or self.admin_token}", **kw.pop("headers", {})}
        with local_session() as session:
            return session.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30, **kw)

    def user_token(self, name: str, **body) -> str:
        """A new API token of user `name`, as an admin makes it (POST /hub/api/users/{name}/tokens): it carries the
        user's own permissions (the `token` role: `inherit`), like the token of the user's own single-user server."""
        reply = self.api("POST", f"/users/{name}/tokens", json={"note": "tests/hub.py", **body})
        if reply.status_code != 201:
            raise HubError(f"token for {name}: {reply.status_code} {reply.text[:500]}")
        return reply.json()["token"]

    def login(self, name: str, password: str | None = None) -> requests.Session:
        """A session logged in as `name` through the hub's own login form (the _xsrf field and cookie, then POST),
        as a browser does. Its cookies then carry it through any service's OAuth: session.get(hub.service_url(x))
        follows service -> /hub/api/oauth2/authorize -> /services/x/oauth_callback -> the page asked for."""
        session = local_session()
        form = session.get(f"{self.url}/hub/login", timeout=30)
        form.raise_for_status()
        match = re.search(r'name="_xsrf"\s+value="([^"]+)"', form.text)
        if match is None:
            raise HubError(f"no _xsrf field on the hub's login page:\n{form.text[:2000]}")
        reply = session.post(f"{self.url}/hub/login", allow_redirects=False, timeout=30, data={
            "_xsrf": match.group(1), "username": name, "password": self.password if password is None else password})
        # a success redirects (to /hub/home: redirect_to_server is off) and sets the hub's login cookie;
        # a wrong password re-renders the form with 403
        if reply.status_code != 302 or "jupyterhub-hub-login" not in session.cookies:
            session.close()
            raise HubError(f"login of {name} refused: {reply.status_code}")
        return session

    def login_in_browser(self, tab, name: str, password: str | None = None) -> None:
        """Log `name` in inside a tests/browser.py tab (Chromium(...).open(any URL)): the hub's login page, its form
        filled in and submitted; the browser's profile then holds the hub's cookie for every tab, and
        tab.submit(f"location.href = {json.dumps(hub.service_url(x))}") walks the service's OAuth as a student would."""
        tab.submit(f"location.href = {json.dumps(self.url + '/hub/login')}")
        fill = (f"document.querySelector('input[name=username]').value = {json.dumps(name)};"
                f"document.querySelector('input[name=password]').value = "
                f"{json.dumps(self.password if password is None else password)};"
                "document.querySelector('form').submit()")
        tab.submit(fill)
        where = tab.evaluate("location.pathname")
        if where.rstrip("/").endswith("/hub/login"):
            raise HubError(f"browser login of {name} refused: {tab.text()[:500]}")


def _config(*, bind_port: int, hub_port: int, proxy_api_port: int, directory: Path, services: list[dict],
            users: list[str], admin_users: list[str], groups: dict[str, dict], roles: list[dict], admin_token: str,
            password: str, extra_config: str) -> str:
    service_names = [s["name"] for s in services if s.get("url")]
    user_role = {"name": "user", "scopes": ["self", *(f"access:services!service={n}" for n in service_names)]}
    other_roles = []
    for role in roles:  # a caller's `user` role adds its scopes to ours
        if role["name"] == "user":
            user_role["scopes"] += [s for s in role.get("scopes", []) if s not in user_role["scopes"]]
        else:
            other_roles.append(role)
    all_services = [*services, {"name": "tests-hub-harness", "api_token": admin_token}]
    load_roles = [
        user_role,
        # the harness's own token: manage users and groups, make users' tokens, see services and the proxy's routes
        {"name": "tests-hub-harness", "services": ["tests-hub-harness"],
         "scopes": ["admin:users", "admin:groups", "tokens", "admin:services", "list:services", "read:hub", "proxy"]},
        *other_roles,
    ]
    settings = {
        "JupyterHub.bind_url": f"http://127.0.0.1:{bind_port}/",
        "JupyterHub.hub_bind_url": f"http://127.0.0.1:{hub_port}/",
        "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{proxy_api_port}",
        "ConfigurableHTTPProxy.command": [str(PROXY)],
        "ConfigurableHTTPProxy.pid_file": str(directory / "jupyterhub-proxy.pid"),
        "JupyterHub.db_url": f"sqlite:///{directory / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(directory / "jupyterhub_cookie_secret"),
        "JupyterHub.authenticator_class": "dummy",
        "Authenticator.allow_all": True,
        # listed users exist in the hub's database from the start (their tokens can be made before any login)
        "Authenticator.allowed_users": sorted(set(users) | set(admin_users)),
        "Authenticator.admin_users": sorted(admin_users),
        # one password for everyone, so that a wrong one is refused. Deprecated since 5.3 (a warning in the log) for
        # SharedPasswordAuthenticator, which wants admins to log in with a second password of >= 32 characters
        "DummyAuthenticator.password": password,
        # never spawn: after login go to /hub/home, not /hub/spawn (there is no single-user server to start)
        "JupyterHub.redirect_to_server": False,
        "JupyterHub.implicit_spawn_seconds": 0,
        "JupyterHub.load_groups": groups,  # 5.x format: {"group": {"users": [...]}} (a bare list is deprecated since 3.2)
        "JupyterHub.load_roles": load_roles,
        "JupyterHub.services": all_services,
        "JupyterHub.log_level": "DEBUG" if os.environ.get("AUTOGRADE_HUB_DEBUG") == "1" else "INFO",
    }
    lines = ["# written by tests/hub.py", "c = get_config()  # noqa: F821"]
    lines += [f"c.{key} = {value!r}" for key, value in settings.items()]
    return "\n".join(lines) + "\n" + extra_config + "\n"


def _wait_for(check, what: str, hub: Hub, deadline: float) -> None:
    while True:
        if hub.process.poll() is not None:
            raise HubError(f"jupyterhub exited ({hub.process.returncode}) before {what}; log:\n{hub.log_tail()}")
        try:
            if check():
                return
        except (requests.RequestException, OSError):
            pass
        if time.monotonic() > deadline:
            raise HubError(f"timed out waiting for {what}; log:\n{hub.log_tail()}")
        time.sleep(0.1)


def _port_open(url: str) -> bool:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=1):
        return True


def _stop(hub: Hub) -> None:
    """SIGTERM to the hub (it stops its managed services, then its proxy), SIGKILL after 30 s; whatever it had
    started and is still alive then is recorded in hub.leftovers and killed."""
    process = hub.process
    if process is None:
        return
    hub.started = descendants(process.pid) if process.poll() is None else []
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            # a service gets SIGINT, SIGTERM after 10 s if it ignores that, SIGKILL 5 s later (LocalProcessSpawner)
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    deadline = time.monotonic() + 2  # a child that got its signal may still be exiting
    while any(p.alive() for p in hub.started) and time.monotonic() < deadline:
        time.sleep(0.05)
    hub.leftovers = [p for p in hub.started if p.alive()]
    for proc in hub.leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def running_hub(tmp_path: Path, services: list[dict] = (), users: list[str] = (),
                groups: dict[str, list[str] | dict] | None = None, admin_users: list[str] = (),
                roles: list[dict] = (), password: str = "hub-test-password", extra_config: str = "",
                timeout: float = START_TIMEOUT):
    """A JupyterHub with these managed (or external) `services`, running until the block ends.

    services: JupyterHub service definitions (name, command, environment, url, ...); a service with a command and no
      url gets http://127.0.0.1:<free port> (it reads it from $JUPYTERHUB_SERVICE_URL), and oauth_no_confirm=True.
      The hub runs with cwd `tmp_path`; its log is tmp_path/jupyterhub.log.
    users / admin_users: created at start; groups: {"group": ["user", ...]} or JupyterHub's {"group": {"users": [...]}};
    roles: more JupyterHub roles (a role named "user" adds its scopes to every user's);
    extra_config: Python appended to the generated jupyterhub_config.py.

    Returns once the hub answers through the proxy and every managed service with a url accepts connections.
    """
    require_hub()
    directory = Path(tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    defined = []
    for spec in services:
        spec = dict(spec)
        if spec.get("command") and not spec.get("url"):
            spec["url"] = f"http://127.0.0.1:{free_port()}"
        if spec.get("url"):
            spec.setdefault("oauth_no_confirm", True)
        defined.append(spec)
    group_specs = {name: ({"users": list(spec)} if isinstance(spec, (list, tuple)) else dict(spec))
                   for name, spec in (groups or {}).items()}
    bind_port, hub_port, proxy_api_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(32)
    config = directory / "jupyterhub_config.py"
    config.write_text(_config(bind_port=bind_port, hub_port=hub_port, proxy_api_port=proxy_api_port,
                              directory=directory, services=defined, users=list(users),
                              admin_users=list(admin_users), groups=group_specs, roles=list(roles),
                              admin_token=admin_token, password=password, extra_config=extra_config))
    hub = Hub(url=f"http://127.0.0.1:{bind_port}", hub_api_url=f"http://127.0.0.1:{hub_port}/hub/api",
              admin_token=admin_token, password=password, dir=directory, log_path=directory / "jupyterhub.log",
              services={s["name"]: s for s in defined})
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)  # nothing here leaves 127.0.0.1
    with open(hub.log_path, "ab") as log:
        # its own session: a Ctrl-C in the terminal reaches pytest, and the hub is stopped by _stop, once
        hub.process = subprocess.Popen([str(JUPYTERHUB), "-f", str(config)], cwd=directory, env=env,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
    started = time.monotonic()
    try:
        deadline = started + timeout
        with local_session() as session:
            # /hub/api/ answers without a token once the hub is up and the proxy routes to it
            _wait_for(lambda: session.get(f"{hub.url}/hub/api/", timeout=2).status_code == 200,
                      "the hub's API through the proxy", hub, deadline)
        for spec in defined:
            if spec.get("command") and spec.get("url"):
                _wait_for(lambda: _port_open(spec["url"]), f"service {spec['name']} at {spec['url']}", hub, deadline)
        hub.start_seconds = time.monotonic() - started
        yield hub
    finally:
        _stop(hub)
