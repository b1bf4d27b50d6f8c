"""Prometheus metrics at nginx's /metrics (allowed addresses, admin key or
token), the PRD's JSON at /admin/metrics, and the numbers moving with what
happens."""
import re
import subprocess

import requests

from conftest import (BASE_URL, CERT, Client, assert_envelope, private_stack, py, run)

TOKEN = "test-metrics-token-0123456789"


def scrape(headers):
    s = requests.Session()
    s.trust_env = False
    return s.get(BASE_URL + "/metrics", headers=headers, verify=CERT, timeout=30)


def value(text, name, **labels):
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        m = re.match(r"^(\w+)(\{(.*)\})? (\S+)$", line)
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if m.group(1) == name and all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return 0.0


def test_metrics_need_a_key_and_pass_promtool(admin, user_key):
    assert_envelope(scrape({}), 401, "unauthorized")
    assert_envelope(scrape({"X-API-KEY": user_key}), 403, "forbidden")
    r = scrape({"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    check = subprocess.run(["promtool", "check", "metrics"], input=r.text, text=True,
                           capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    for family in ("sandbox_runs_started_total", "sandbox_runs_completed_total",
                   "sandbox_run_duration_seconds", "sandbox_queue_wait_seconds",
                   "sandbox_run_start_latency_seconds", "sandbox_queue_full_total",
                   "sandbox_queue_ttl_expired_total", "sandbox_upload_bytes_total",
                   "sandbox_upload_files_total", "sandbox_log_bytes_total",
                   "sandbox_log_truncations_total", "sandbox_ws_connections_opened_total",
                   "sandbox_ws_heartbeats_sent_total", "sandbox_ws_disconnects_total",
                   "sandbox_ws_queue_drops_total", "sandbox_sessions_created_total",
                   "sandbox_api_requests_total", "sandbox_api_request_duration_seconds"):
        assert f"# TYPE {family} " in r.text, family
    # Not a public API path.
    assert_envelope(admin.get("/metrics"), 404, "not_found")


def test_numbers_follow_events(admin):
    before = scrape({"X-API-KEY": admin.s.headers["X-API-KEY"]}).text
    final, _ = run(admin, **py("print('m')"))
    failed, _ = run(admin, **py("raise SystemExit(3)"))
    r = admin.post(f"/sessions", json={"spec_version": "1.0", "base_image": "bash"})
    sid = r.json()["session_id"]
    admin.post(f"/sessions/{sid}/files", files=[("files", ("a.txt", b"12345"))])
    admin.delete(f"/sessions/{sid}")
    after = scrape({"Authorization": f"Bearer {TOKEN}"}).text

    def delta(name, **l):
        return value(after, name, **l) - value(before, name, **l)
    assert delta("sandbox_runs_started_total", runtime="oci") >= 2
    assert delta("sandbox_runs_completed_total", runtime="oci", outcome="completed",
                 reason="exit_code_0") >= 1
    assert delta("sandbox_runs_completed_total", runtime="oci", outcome="failed",
                 reason="nonzero_exit") >= 1
    assert delta("sandbox_run_duration_seconds_count", runtime="oci", outcome="completed",
                 reason="exit_code_0") >= 1
    assert delta("sandbox_queue_wait_seconds_count", runtime="oci") >= 2
    assert delta("sandbox_run_start_latency_seconds_bucket", runtime="oci", le="+Inf") >= 2
    assert delta("sandbox_sessions_created_total", runtime="oci") >= 1
    assert delta("sandbox_upload_files_total", kind="multipart") >= 1
    assert delta("sandbox_upload_bytes_total", kind="multipart") >= 5
    assert delta("sandbox_api_requests_total", route="/runs", status="202") >= 2
    assert delta("sandbox_api_request_duration_seconds_count", route="/runs",
                 status="202") >= 2


def test_admin_metrics_json(admin, user_key):
    assert_envelope(Client(BASE_URL, user_key).get("/admin/metrics"), 403, "forbidden")
    body = admin.get("/admin/metrics").json()
    series = body["sandbox_runs_completed_total"]
    assert all(set(s) == {"labels", "value"} for s in series)
    assert any(s["labels"].get("outcome") == "completed" for s in series)
    assert "sandbox_api_requests_total" in body and "sandbox_ws_heartbeats_sent_total" in body


def test_metrics_address_allow_list_and_rate_limits():
    conf = "SANDBOX_METRICS_ALLOW = 192.0.2.1\nSANDBOX_RATE_LIMIT_RPS = 2\nSANDBOX_RATE_LIMIT_BURST = 3"
    with private_stack("sandbox-rl-", conf) as (d, c):
        s = requests.Session()
        s.trust_env = False
        r = s.get(c.base + "/metrics", headers={"X-API-KEY": c.s.headers["X-API-KEY"]},
                  verify=c.s.verify, timeout=30)
        assert_envelope(r, 403, "forbidden")
        codes = [c.get("/runtimes") for _ in range(12)]
        limited = [r for r in codes if r.status_code == 429]
        assert limited, [r.status_code for r in codes]
        body = assert_envelope(limited[0], 429, "rate_limited")
        assert limited[0].headers["Retry-After"] == "1"
        assert body["error"]["details"]["limit_rps"] == 2
        # Per key: another key is not limited by this one's burst.
        import os
        from conftest import BUILD, server_env
        env = server_env(SANDBOX_CONFIG_FILE=os.path.join(d, "sandbox.conf"))
        key = subprocess.run([os.path.join(BUILD, "sandboxctl"), "key", "create", "--user",
                              "bob"], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
        assert Client(c.base, key, cert=c.s.verify).get("/runtimes").status_code == 200
