"""A fresh stack starts, tolerates a second start, and stops completely."""
import os
import shutil
import tempfile
import socket
import subprocess

import requests

SESSION = requests.Session()
SESSION.trust_env = False

from conftest import stack_script


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _pids(d):
    out = {}
    for name in ("api", "supervisor", "nginx"):
        p = os.path.join(d, "pids", name + ".pid")
        if os.path.exists(p):
            out[name] = int(open(p).read())
    return out


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


def test_fresh_stack_start_restart_stop():
    # Not under pytest's tmp_path: that is private to root, and PostgreSQL
    # runs as its own user.
    d = tempfile.mkdtemp(prefix="sandbox-lifecycle.")
    port = _free_port()
    try:
        stack_script("up", d, str(port))
        env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "dev.env")))
        assert env["SANDBOX_URL"] == f"https://127.0.0.1:{port}"
        assert env["SANDBOX_API_KEY"].startswith("sbx_")
        cert = os.path.join(d, "tls", "ca.pem")
        r = SESSION.get(env["SANDBOX_URL"] + "/api/v1/sandbox/readyz", verify=cert, timeout=10)
        assert r.status_code == 200, r.text
        r = SESSION.get(env["SANDBOX_URL"] + "/api/v1/sandbox/runtimes", verify=cert,
                         headers={"X-API-KEY": env["SANDBOX_API_KEY"]}, timeout=10)
        assert r.status_code == 200
        first = _pids(d)
        assert set(first) == {"api", "supervisor", "nginx"}
        # Starting again while up is harmless: same processes, same key.
        stack_script("up", d, str(port))
        assert _pids(d) == first
        env2 = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "dev.env")))
        assert env2 == env
    finally:
        stack_script("down", d)
        shutil.rmtree(d, ignore_errors=True)
    for name, pid in first.items():
        assert not _alive(pid), f"{name} ({pid}) still running"
    pg = subprocess.run(["pgrep", "-f", f"postgres -D {d}/pg/data"], capture_output=True)
    assert pg.returncode != 0, "postgres still running"
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "port still open"
