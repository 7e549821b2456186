"""Throughput of /api/public/settings, /api/me and login, each against nginx serving a
static file of the same bytes, in one run. Targets: public settings and /api/me with a
token >= 0.65x nginx each (on the way to 0.8x). Both are asked on kept-alive
connections, as a browser does, so nearly every request is one the HTTP protocol
answers itself (``ManifoldApp.quick``).

Run: .venv/bin/python -m bench.bench_api [--seconds N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.common import ADMIN_PASSWORD, http, manifold_server, nginx_server, report, wrk

LOGIN_LUA = """
wrk.method = "POST"
wrk.body = '{"username":"admin","password":"%s"}'
wrk.headers["Content-Type"] = "application/json"
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-api-"))
    static = work / "static"
    static.mkdir()
    with manifold_server(work / "data") as port:
        base = f"http://127.0.0.1:{port}"
        login = {"username": "admin", "password": ADMIN_PASSWORD}
        login_body = http("POST", f"{base}/api/auth/login", login)
        token = json.loads(login_body)["data"]["token"]
        (static / "settings.json").write_bytes(http("GET", f"{base}/api/public/settings"))
        (static / "me.json").write_bytes(http("GET", f"{base}/api/me", token=token))
        (static / "login.json").write_bytes(login_body)
        script = work / "login.lua"
        script.write_text(LOGIN_LUA % ADMIN_PASSWORD)
        ours = {
            "public settings": wrk(f"{base}/api/public/settings", args.seconds),
            "me": wrk(f"{base}/api/me", args.seconds, header=f"Authorization: {token}"),
            "login (argon2id)": wrk(f"{base}/api/auth/login", args.seconds, 4, str(script)),
        }
    with nginx_server(static) as port:
        base = f"http://127.0.0.1:{port}"
        peer = {
            "public settings": wrk(f"{base}/settings.json", args.seconds),
            "me": wrk(f"{base}/me.json", args.seconds),
            "login (argon2id)": wrk(f"{base}/login.json", args.seconds, 4),
        }
    report([(name, ours[name], peer[name]) for name in ours])


if __name__ == "__main__":
    main()
