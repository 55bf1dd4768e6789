"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the browser tests.

The protocol runs over a pipe (`--remote-debugging-pipe`: commands on fd 3, replies on fd 4, NUL-separated
JSON), so no port is opened and nothing is downloaded. A page's console errors, uncaught exceptions and log
errors (a resource that failed to load, a CSP violation) are collected while it loads.

Nothing leaves the machine: every request a page makes is paused (the protocol's Fetch domain); those to
127.0.0.1, file: and data: go on, those to a prefix in `offline` are answered from a local folder (formgrader's
page loads MathJax 2.7.7 from cdnjs; Debian's libjs-mathjax is the same library), and any other is refused and
listed in `Tab.blocked` (and chromium resolves no other host name anyway).

Without chromium the tests skip, unless AUTOGRADE_REQUIRE_BROWSER=1 (set by .ci/run): then they fail.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REQUIRE = os.environ.get("AUTOGRADE_REQUIRE_BROWSER") == "1"


def chromium_path() -> str:
    """The chromium binary, or skip (fail under AUTOGRADE_REQUIRE_BROWSER=1)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (as root, scripts/dev.sh installs Debian's chromium and fonts-noto-cjk)"
        if REQUIRE:
            pytest.fail(message + "; AUTOGRADE_REQUIRE_BROWSER=1 makes this a failure")
        pytest.skip(message)
    return found


class BrowserError(RuntimeError):
    pass


MATHJAX_CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"
MATHJAX_LOCAL = Path("/usr/share/javascript/mathjax")  # Debian: libjs-mathjax (scripts/dev.sh installs it)
# cdnjs's latest.js is a loader for MathJax.js (whose own URL tells MathJax where its files are); this one loads
# it while the page is still being parsed, so MathJax is there before formgrader's script runs
LATEST_JS = b"""(function () {
  var src = document.currentScript.src.replace("/latest.js", "/MathJax.js");
  if (document.readyState === "loading") {
    document.write('<script src="' + src + '"><\\/script>');
  } else {
    var script = document.createElement("script");
    script.src = src;
    (document.head || document.body).appendChild(script);
  }
})();"""
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]"}
CONTENT_TYPES = {".js": "application/javascript", ".css": "text/css", ".woff": "font/woff", ".otf": "font/otf",
                 ".json": "application/json", ".png": "image/png", ".svg": "image/svg+xml"}


@dataclass
class Page:
    url: str
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, log errors


class Chromium:
    """One headless browser with a fresh profile; `open(url)` loads a page in a new tab and waits for it."""

    def __init__(self, timeout: float = 60.0, offline: dict[str, Path] | None = None):
        self.timeout = timeout
        self.offline = dict(offline or {})  # URL prefix -> local folder (MATHJAX_CDN -> MATHJAX_LOCAL)
        self._replies: dict[int, dict] = {}
        self._ignored: set[int] = set()
        self._tabs: dict[str, "Tab"] = {}
        self.profile = tempfile.mkdtemp(prefix="autograde-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds():  # in the child: the protocol's fixed descriptors
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        cmd = [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--remote-debugging-pipe",
               "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost",
               f"--user-data-dir={self.profile}", "--window-size=1280,1000", "about:blank"]
        self._log = tempfile.TemporaryFile()  # chromium's own stderr, for the message when it dies
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=self._log, preexec_fn=fds, pass_fds=(3, 4, to_chrome_r, from_chrome_w))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the protocol ------------------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    self._log.seek(0)
                    stderr = self._log.read().decode(errors="replace")
                    raise BrowserError(f"chromium closed the DevTools pipe (exit {self.process.poll()}): {stderr[-2000:]}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _post(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _pump(self, deadline: float) -> None:
        """Read one message: a reply is kept for its command, a paused request answered, an event queued."""
        message = self._read_message(deadline)
        if "id" in message:
            if message["id"] in self._ignored:
                self._ignored.discard(message["id"])
            else:
                self._replies[message["id"]] = message
        elif message.get("method") == "Fetch.requestPaused":
            self._answer_request(message)
        else:
            self._events.append(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        sent = self._post(method, params, session)
        deadline = time.monotonic() + self.timeout
        while sent not in self._replies:
            self._pump(deadline)
        reply = self._replies.pop(sent)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _answer_request(self, message: dict) -> None:
        params, session = message["params"], message.get("sessionId")
        url, request_id = params["request"]["url"], params["requestId"]
        parts = urlsplit(url)
        tab = self._tabs.get(session)

        def reply(method, **extra):
            self._ignored.add(self._post(method, {"requestId": request_id, **extra}, session))

        if parts.scheme in ("file", "data", "about", "blob") or parts.hostname in LOCAL_HOSTS:
            return reply("Fetch.continueRequest")
        for prefix, folder in self.offline.items():
            if url.startswith(prefix):
                name = url[len(prefix):].split("?", 1)[0].split("#", 1)[0]
                local = (folder / name).resolve()
                if name == "latest.js" or (local.is_file() and local.is_relative_to(folder.resolve())):
                    if tab is not None:
                        tab.served.append(url)
                    body = base64.b64encode(LATEST_JS if name == "latest.js" else local.read_bytes()).decode()
                    kind = CONTENT_TYPES.get(local.suffix, "application/octet-stream")
                    return reply("Fetch.fulfillRequest", responseCode=200, body=body,
                                 responseHeaders=[{"name": "Content-Type", "value": kind}])
        if tab is not None:
            tab.blocked.append(url)
        reply("Fetch.failRequest", errorReason="BlockedByClient")

    def _wait_event(self, method: str, session: str, deadline: float) -> dict:
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self._events.pop(i)
            self._pump(deadline)

    # --- pages -------------------------------------------------------------------------------------------

    def open(self, url: str, ready: str | None = None) -> "Tab":
        """Load `url` in a new tab; wait for its load event, then (if given) until the JS expression `ready` is
        true (a page that fills itself in from an API)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, session, Page(url))
        self._tabs[session] = tab
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        deadline = time.monotonic() + self.timeout
        self._wait_event("Page.loadEventFired", session, deadline)
        if ready is not None:
            while not tab.evaluate(f"Boolean({ready})"):
                if time.monotonic() > deadline:
                    raise BrowserError(f"{url}: `{ready}` never became true; errors: {tab.errors}")
                time.sleep(0.2)
        time.sleep(0.3)  # late console errors (a failed XHR after load)
        tab.evaluate("1")
        return tab


class Tab:
    def __init__(self, browser: Chromium, session: str, page: Page):
        self.browser, self.session, self.page = browser, session, page
        self.blocked: list[str] = []  # off-machine requests refused
        self.served: list[str] = []  # off-machine requests answered from a local folder (`offline`)

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far on this tab."""
        kept = []
        for event in self.browser._events:
            if event.get("sessionId") != self.session:
                kept.append(event)
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.page.errors.append("exception: " + (details.get("exception", {}).get("description")
                                                         or details.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.page.errors.append("console.error: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.page.errors.append(f"log: {entry.get('text', '')} {entry.get('url', '')}".strip())
        self.browser._events = kept
        return self.page.errors

    def evaluate(self, expression: str):
        reply = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                       "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails'].get('text')}")
        return reply.get("result", {}).get("value")

    def submit(self, expression: str) -> None:
        """Run JS that navigates (submits a form) and wait for the next page's load event."""
        self.evaluate(expression)
        self.browser._wait_event("Page.loadEventFired", self.session, time.monotonic() + self.browser.timeout)

    def set_width(self, width: int, mobile: bool = False, height: int = 800) -> None:
        """Lay the page out as a screen `width` CSS pixels wide shows it (`mobile`: a phone's, which honours the page's
        viewport meta tag), and wait until it is loaded again at that width."""
        self.browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                                 "mobile": mobile}, session=self.session)
        self.browser.send("Page.reload", session=self.session)
        self.browser._wait_event("Page.loadEventFired", self.session, time.monotonic() + self.browser.timeout)
        self.evaluate("1")

    def text(self) -> str:
        """The page's visible text (what a person reads)."""
        return self.evaluate("document.body.innerText")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.browser.send("Page.captureScreenshot", {"format": "png"},
                                                  session=self.session)["data"])
