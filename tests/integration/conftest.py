"""Fixtures for the black-box suite: a real stack (PostgreSQL, nginx,
sandbox-api, sandbox-supervisor) started by scripts/test.sh, reached only
through nginx over TLS, plus helpers to run the project's binaries."""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import requests

STACK = os.environ["TEST_STACK_DIR"]
ROOT = os.environ["TEST_ROOT"]
BUILD = os.environ["TEST_BUILD"]
API = "/api/v1/sandbox"
# The runtime-independent part of the suite runs once per runtime
# (scripts/test.sh): one-shot runs and sessions ask for this one.
RUNTIME = os.environ.get("TEST_RUNTIME", "oci")


def _read_env(path):
    out = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                out[k] = v
    return out


DEV_ENV = _read_env(os.path.join(STACK, "dev.env"))
BASE_URL = DEV_ENV["SANDBOX_URL"]
ADMIN_KEY = DEV_ENV["SANDBOX_API_KEY"]
CERT = os.path.join(STACK, "tls", "ca.pem")


def server_env(**extra):
    """A clean environment for the project's binaries: no SANDBOX_* key
    the test did not ask for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env["SANDBOX_CONFIG_FILE"] = os.path.join(STACK, "sandbox.conf")
    env.update(extra)
    return env


def sandboxctl(*args, check=True, **extra_env):
    return subprocess.run([os.path.join(BUILD, "sandboxctl"), *args],
                          env=server_env(**extra_env), capture_output=True,
                          text=True, timeout=30, check=check)


def psql(sql):
    """Run SQL as the service's database role, return rows of text."""
    r = subprocess.run(["psql", "-X", "-At", "-h", os.path.join(STACK, "run", "pg"),
                        "-U", "sandbox", "-d", "sandbox", "-c", sql],
                       capture_output=True, text=True, timeout=30, check=True)
    return [line.split("|") for line in r.stdout.splitlines() if line]


def stack_script(*args, check=True, extra_conf=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    if extra_conf is not None:
        env["STACK_EXTRA_CONF"] = extra_conf
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "stack.sh"), *args],
                       capture_output=True, text=True, timeout=180, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"stack.sh {' '.join(args)} failed: {r.stderr}")
    return r


class Client:
    def __init__(self, base_url, key=None, cert=CERT):
        self.base = base_url
        self.s = requests.Session()
        self.s.verify = cert
        # No proxies or CA bundles from the environment: the stack is on
        # loopback and trusted through its own CA only.
        self.s.trust_env = False
        if key:
            self.s.headers["X-API-KEY"] = key

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 30)
        url = path if path.startswith("http") else self.base + API + path
        return self.s.request(method, url, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def raw(self, method, path, headers=None, body=None):
        """A request whose path goes out exactly as written (requests and
        urllib3 resolve dot-segments): (status, headers, body bytes)."""
        import http.client
        import ssl
        import urllib.parse
        u = urllib.parse.urlsplit(self.base)
        ctx = ssl.create_default_context(cafile=self.s.verify)
        c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
        h = {"X-API-KEY": self.s.headers.get("X-API-KEY", "")}
        h.update(headers or {})
        c.request(method, API + path, body=body, headers=h)
        r = c.getresponse()
        out = (r.status, dict(r.getheaders()), r.read())
        c.close()
        return out


def assert_envelope(resp, status, code):
    assert resp.status_code == status, resp.text
    assert resp.headers["Content-Type"].startswith("application/json"), resp.headers
    body = resp.json()
    assert set(body) >= {"error", "request_id"}, body
    err = body["error"]
    assert err["code"] == code, body
    assert isinstance(err["message"], str) and err["message"], body
    assert isinstance(err["details"], dict), body
    assert body["request_id"] == resp.headers["X-Request-Id"], (body, resp.headers)
    return body


def wait_for(pred, timeout=20.0, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    return last


def log_lines(name):
    with open(os.path.join(STACK, "logs", name)) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


@pytest.fixture
def admin():
    return Client(BASE_URL, ADMIN_KEY)


@pytest.fixture
def anon():
    return Client(BASE_URL)


@pytest.fixture
def user_key():
    """A fresh non-admin key, revoked afterwards."""
    r = sandboxctl("key", "create", "--user", "alice", "--label", "pytest")
    key = r.stdout.strip()
    yield key
    key_id = "key_" + key.split("_")[1]
    sandboxctl("key", "revoke", key_id, check=False)


TERMINAL = {"completed", "failed", "timed_out", "killed"}


def effective_config():
    """The stack's effective configuration, as `sandbox-api -n` prints it."""
    r = subprocess.run([os.path.join(BUILD, "sandbox-api"), "-n"], env=server_env(),
                       capture_output=True, text=True, timeout=20, check=True)
    out = {}
    for line in r.stdout.splitlines():
        if " = " in line and not line.startswith("#"):
            k, v = line.split(" = ", 1)
            out[k] = v
    return out


def submit(client, body=None, headers=None, **fields):
    spec = {"spec_version": "1.0", "base_image": "python:3.11-slim"}
    if body:
        spec.update(body)
    spec.update(fields)
    if RUNTIME != "oci" and "session_id" not in spec and "runtime" not in spec:
        spec["runtime"] = RUNTIME
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return client.post("/runs", data=json.dumps(spec), headers=h)


def wait_run(client, run_id, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/runs/{run_id}")
        assert r.status_code == 200, r.text
        body = r.json()
        if body["phase"] in TERMINAL:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {body['phase']} after {timeout}s")
        time.sleep(0.05)


def wait_phase(client, run_id, phase, timeout=30):
    return wait_for(lambda: client.get(f"/runs/{run_id}").json()["phase"] == phase,
                    timeout=timeout, interval=0.05)


def run(client, timeout=60, headers=None, **fields):
    """Submit a run and wait for its end: (final run, frames)."""
    r = submit(client, headers=headers, **fields)
    assert r.status_code == 202, r.text
    final = wait_run(client, r.json()["run_id"], timeout)
    return final, frames(client, final["id"])


def frames(client, run_id):
    r = client.get(f"/runs/{run_id}/logs")
    assert r.status_code == 200, r.text
    return r.json()


def output(fr, stream="stdout"):
    import base64
    data = b""
    for f in fr:
        if f["type"] == stream:
            data += (base64.b64decode(f["data"]) if f["encoding"] == "base64"
                     else f["data"].encode())
    return data


def py(code, **fields):
    """Fields for a Python one-shot run."""
    fields.setdefault("base_image", "python:3.11-slim")
    return dict(command=["python3", "-c", code], **fields)


def new_session(client, headers=None, **fields):
    """Create a session (201) and return its JSON."""
    spec = {"spec_version": "1.0", "base_image": "python:3.11-slim"}
    spec.update(fields)
    if RUNTIME != "oci":
        spec.setdefault("runtime", RUNTIME)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    r = client.post("/sessions", data=json.dumps(spec), headers=h)
    assert r.status_code in (200, 201), r.text
    return r.json()


def submit_in(client, sid, cmd, **fields):
    """POST a run in session sid."""
    spec = {"spec_version": "1.0", "session_id": sid, "command": cmd}
    spec.update(fields)
    return client.post("/runs", data=json.dumps(spec),
                       headers={"Content-Type": "application/json"})


def run_in(client, sid, cmd, **fields):
    """A run in session sid, to its end: (final run, frames)."""
    r = submit_in(client, sid, cmd, **fields)
    assert r.status_code == 202, r.text
    final = wait_run(client, r.json()["run_id"])
    return final, frames(client, final["id"])


def session_dir(session_id):
    return os.path.join(STACK, "data", "sessions", session_id)


@pytest.fixture
def session(admin):
    """A live session of the admin user, deleted afterwards."""
    s = new_session(admin)
    yield s
    admin.delete(f"/sessions/{s['session_id']}")


def docker_containers():
    """Containers of the stack's dockerd carrying our labels."""
    sock = os.path.join(STACK, "run", "docker.sock")
    if not os.path.exists(sock):
        return []
    r = subprocess.run(["curl", "-s", "--unix-socket", sock,
                        "http://d/v1.41/containers/json?all=1&filters=%7B%22label%22%3A%5B%22"
                        "sandbox.managed%3Dtrue%22%5D%7D"],
                       capture_output=True, text=True, timeout=10)
    return [c["Names"][0] for c in json.loads(r.stdout or "[]")]


def host_leftovers():
    """Containers, workspace mounts and cgroups the stack left behind."""
    state = os.path.join(STACK, "data", "oci-state")
    out = subprocess.run(["crun", "--root", state, "list", "-q"], capture_output=True,
                         text=True).stdout.split()
    mounts = [l.split()[4] for l in open("/proc/self/mountinfo")
              if os.path.join(STACK, "data", "runs") in l.split()[4]]
    cgroups = []
    for ctrl in ("memory", "pids", "cpuacct"):
        d = f"/sys/fs/cgroup/{ctrl}/sandbox"
        if os.path.isdir(d):
            cgroups += [x for x in os.listdir(d) if x.startswith("sbx-")]
    return {"containers": out + docker_containers(), "mounts": mounts, "cgroups": cgroups}


def wait_no_leftovers(timeout=10):
    return wait_for(lambda: host_leftovers() == {"containers": [], "mounts": [], "cgroups": []},
                    timeout=timeout)


@contextlib.contextmanager
def private_stack(prefix, conf):
    """A stack of its own (another directory, port and configuration), for
    tests that need settings the shared stack must not have. Yields
    (directory, Client with its admin key)."""
    d = tempfile.mkdtemp(prefix=prefix)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    try:
        stack_script("up", d, str(port), extra_conf=conf)
        env = dict(l.strip().split("=", 1) for l in open(os.path.join(d, "dev.env")))
        yield d, Client(env["SANDBOX_URL"], env["SANDBOX_API_KEY"],
                        cert=os.path.join(d, "tls", "ca.pem"))
    finally:
        stack_script("down", d, check=False)
        shutil.rmtree(d, ignore_errors=True)
