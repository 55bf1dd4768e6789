"""tests/hub.py starts a real JupyterHub: users log in through its form, a managed service identifies them through the
hub's OAuth (JupyterHub's own HubOAuthenticated handlers) and through their API tokens, groups reach the service, and
nothing of the hub is left running afterwards."""

import json
import sys
import textwrap
from urllib.parse import urlsplit

import pytest

from browser import Chromium
from hub import HubError, local_session, running_hub

pytestmark = pytest.mark.slow

# A managed service as JupyterHub documents it (the whoami-oauth example's pattern, tornado): HubOAuthenticated
# identifies the user from the OAuth cookie it set at /oauth_callback, or from an "Authorization: token ..." header;
# HubOAuth() takes everything it needs from the environment the hub gives a managed service.
WHOAMI = textwrap.dedent("""
    import asyncio, json, os, signal
    from urllib.parse import urlsplit

    from tornado import web
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join


    class WhoAmI(HubOAuthenticated, web.RequestHandler):
        def get(self):
            user = self.current_user
            if user is None:
                if "Authorization" in self.request.headers:
                    raise web.HTTPError(403)  # an API call with a token the hub does not know: no redirect
                self.redirect(self.get_login_url())  # a browser: the hub's OAuth (and its login page)
                return
            self.set_header("Content-Type", "application/json")
            self.write(json.dumps({
                "name": user["name"],
                "groups": sorted(user.get("groups", [])),
                "via": "token" if getattr(self, "_token_authenticated", False) else "cookie",
            }))


    async def main():
        prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]  # /services/whoami/
        app = web.Application([
            (prefix, WhoAmI),
            (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
        ], cookie_secret=os.urandom(32))  # signs the OAuth state cookie
        address = urlsplit(os.environ["JUPYTERHUB_SERVICE_URL"])
        app.listen(address.port, address.hostname)
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):  # the hub stops a managed service with SIGINT
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()


    asyncio.run(main())
""")


def whoami_service(tmp_path) -> dict:
    script = tmp_path / "whoami_service.py"
    script.write_text(WHOAMI)
    return {"name": "whoami", "command": [sys.executable, str(script)]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hub")
    with running_hub(directory, services=[whoami_service(directory)], users=["alice", "bob"],
                     groups={"instructors": ["bob"]}) as running:
        yield running


def whoami(session, hub) -> dict:
    reply = session.get(hub.service_url("whoami"), timeout=30)
    assert reply.status_code == 200, (reply.status_code, reply.url, reply.text[:500])
    assert urlsplit(reply.url).path == "/services/whoami/", reply.url
    return reply.json()


def test_each_user_logged_in_through_the_hub_is_themselves_at_the_service(hub):
    alice, bob = hub.login("alice"), hub.login("bob")
    first = alice.get(hub.service_url("whoami"), timeout=30)
    # the OAuth really ran: service -> the hub's authorize -> the service's callback -> the page (no confirmation page)
    hops = [urlsplit(r.url).path for r in first.history]
    assert hops[:3] == ["/services/whoami/", "/hub/api/oauth2/authorize", "/services/whoami/oauth_callback"], hops
    assert first.json()["name"] == "alice"
    assert whoami(bob, hub)["name"] == "bob"
    assert whoami(alice, hub)["name"] == "alice"  # still alice after bob's login: cookies are per session
    assert alice.cookies.get("service-whoami") != bob.cookies.get("service-whoami")
    assert whoami(alice, hub)["via"] == "cookie"
    assert "Allowing service whoami to complete OAuth without confirmation" in hub.log_text()


def test_no_login_no_name(hub):
    with local_session() as anonymous:
        reply = anonymous.get(hub.service_url("whoami"), timeout=30)
        # the service sent the browser to the hub's OAuth, and the hub to its login page: no user, no JSON
        assert urlsplit(reply.url).path == "/hub/login", reply.url
        assert "alice" not in reply.text and "bob" not in reply.text
        with pytest.raises(json.JSONDecodeError):
            reply.json()
    with pytest.raises(HubError, match="refused"):
        hub.login("alice", password="not-the-password")


def test_a_users_api_token_is_that_user_and_a_made_up_one_is_refused(hub):
    alice, bob = hub.user_token("alice"), hub.user_token("bob")
    with local_session() as session:
        for token, name in ((alice, "alice"), (bob, "bob")):
            reply = session.get(hub.service_url("whoami"), headers={"Authorization": f"token {token}"},
                                allow_redirects=False, timeout=30)
            assert reply.status_code == 200, (reply.status_code, reply.text[:300])
            assert reply.json()["name"] == name and reply.json()["via"] == "token"
        made_up = session.get(hub.service_url("whoami"), headers={"Authorization": "token " + "0" * 43},
                              allow_redirects=False, timeout=30)
        assert made_up.status_code == 403 and "alice" not in made_up.text and "bob" not in made_up.text


def test_groups_reach_the_service(hub):
    # no scope was configured for this: identify scopes include read:users:groups!user (see tests/hub.py)
    assert whoami(hub.login("bob"), hub)["groups"] == ["instructors"]
    assert whoami(hub.login("alice"), hub)["groups"] == []
    with local_session() as session:
        reply = session.get(hub.service_url("whoami"), headers={"Authorization": f"token {hub.user_token('bob')}"},
                            timeout=30)
        assert reply.json()["groups"] == ["instructors"]


def test_login_in_a_browser(hub):
    with Chromium() as browser:
        tab = browser.open(hub.url + "/hub/api/")
        hub.login_in_browser(tab, "bob")
        tab.submit(f"location.href = {json.dumps(hub.service_url('whoami'))}")
        assert json.loads(tab.text()) == {"name": "bob", "groups": ["instructors"], "via": "cookie"}
        assert tab.blocked == []


def test_nothing_of_the_hub_remains_after_it_ends(tmp_path):
    with running_hub(tmp_path, services=[whoami_service(tmp_path)], users=["alice"]) as running:
        processes = running.processes()
        # while it runs: the hub, one proxy, one service (so the check below is not about processes never seen)
        assert [len(processes[k]) for k in ("hub", "proxy", "whoami")] == [1, 1, 1], processes
        assert all(p.alive() for procs in processes.values() for p in procs)
        assert whoami(running.login("alice"), running)["name"] == "alice"
    everything = [p for procs in processes.values() for p in procs]
    assert not [p for p in everything if p.alive()], everything
    # the hub stopped all it had started (the harness had nothing left to kill), by itself on SIGTERM (not killed)
    assert running.leftovers == [], running.leftovers
    assert running.process.returncode == 0, (running.process.returncode, running.log_tail())
    assert {p.pid for p in everything[1:]} <= {p.pid for p in running.started}
    assert "Cleaning up 1 services" in running.log_text()
