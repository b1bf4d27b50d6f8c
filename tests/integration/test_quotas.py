"""Per-user quotas: queued runs, CPU seconds per day, stored artifact
bytes — 429 quota_exceeded with reason, limit, scope and Retry-After."""
import os
import subprocess

import pytest

from conftest import BUILD, Client, assert_envelope, private_stack, py, run, server_env, submit

CONF = """SANDBOX_MAX_CONCURRENT_RUNS = 1
SANDBOX_USER_MAX_CONCURRENT_RUNS = 1
SANDBOX_USER_MAX_QUEUED_RUNS = 2
SANDBOX_USER_DAILY_CPU_SEC = 1
SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB = 1"""


@pytest.fixture(scope="module")
def stack():
    with private_stack("sandbox-quota-", CONF) as (d, admin):
        def new_user(name):
            env = server_env(SANDBOX_CONFIG_FILE=os.path.join(d, "sandbox.conf"))
            key = subprocess.run([os.path.join(BUILD, "sandboxctl"), "key", "create", "--user",
                                  name], env=env, capture_output=True, text=True,
                                 check=True).stdout.strip()
            return Client(admin.base, key, cert=admin.s.verify)
        yield admin, new_user


def test_queued_runs_quota(stack):
    admin, new_user = stack
    c = new_user("q-user")
    first = submit(c, **py("import time; time.sleep(30)"))
    assert first.status_code == 202
    queued = [submit(c, **py("pass")) for _ in range(2)]
    assert all(r.status_code == 202 for r in queued), [r.text for r in queued]
    r = submit(c, **py("pass"))
    body = assert_envelope(r, 429, "quota_exceeded")
    d = body["error"]["details"]
    assert d["reason"] == "queued_runs" and d["limit"] == 2 and d["scope"] == "user"
    assert int(r.headers["Retry-After"]) >= 1
    # Another user is not affected.
    other = new_user("q-other")
    assert submit(other, **py("pass")).status_code == 202
    for x in [first] + queued:
        c.post(f"/runs/{x.json()['run_id']}/cancel")


def test_daily_cpu_quota(stack):
    admin, new_user = stack
    c = new_user("cpu-user")
    final, _ = run(c, **py("import time\nt = time.process_time()\n"
                           "while time.process_time() - t < 1.3: pass"))
    assert final["resource_usage"]["cpu_time_sec"] >= 1, final
    r = submit(c, **py("pass"))
    body = assert_envelope(r, 429, "quota_exceeded")
    d = body["error"]["details"]
    assert d["reason"] == "cpu_seconds_per_day" and d["limit"] == 1 and d["current"] >= 1
    assert 0 < int(r.headers["Retry-After"]) <= 86400


def test_artifact_bytes_quota(stack):
    admin, new_user = stack
    c = new_user("art-user")
    final, _ = run(c, base_image="bash", command=["bash", "-c",
                   "head -c 524288 /dev/zero > a; head -c 524288 /dev/zero > b"],
                   capture_patterns=["a", "b"])
    assert final["resource_usage"]["artifact_bytes"] == 1048576, final
    r = submit(c, base_image="bash", command=["true"], capture_patterns=["*"])
    body = assert_envelope(r, 429, "quota_exceeded")
    assert body["error"]["details"]["reason"] == "artifact_bytes"
    assert "Retry-After" in r.headers
    # Runs that capture nothing are not held back.
    assert submit(c, base_image="bash", command=["true"]).status_code == 202
