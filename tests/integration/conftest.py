"""Fixtures for the black-box suite: a real stack (PostgreSQL, nginx,
sandbox-api, sandbox-supervisor) started by scripts/test.sh, reached only
through nginx over TLS, plus helpers to run the project's binaries."""
import json
import os
import subprocess
import time

import pytest
import requests

STACK = os.environ["TEST_STACK_DIR"]
ROOT = os.environ["TEST_ROOT"]
BUILD = os.environ["TEST_BUILD"]
API = "/api/v1/sandbox"


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


def stack_script(*args, check=True):
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "stack.sh"), *args],
                          capture_output=True, text=True, timeout=180, check=check,
                          env={k: v for k, v in os.environ.items()
                               if not k.startswith("SANDBOX_")})


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
