"""Sessions: a workspace plus an image and limits with a TTL, shared by the
runs made in it; get-or-create by thread; expiry and deletion free it."""
import json
import os
import threading
import time

from conftest import (BASE_URL, RUNTIME, Client, run_in, submit_in, assert_envelope, new_session, output, psql,
                      session_dir, submit, wait_for, wait_phase, wait_run)


def is_mounted(path):
    return any(line.split()[4] == path for line in open("/proc/self/mountinfo"))


def test_create_get_list_delete(admin):
    s = new_session(admin, ttl_sec=120, labels={"team": "a"}, env={"GREETING": "hi"},
                    resources={"cpu": 0.5, "memory_mb": 128})
    sid = s["session_id"]
    assert s["state"] == "ready" and s["reused"] is False
    assert s["runtime"] == RUNTIME and s["runtime_info"]["name"] == RUNTIME
    assert len(s["policy_hash"]) == 64 and s["image_digest"].startswith("sha256:")
    assert s["resources"] == {"cpu": 0.5, "memory_mb": 128, "pids": s["resources"]["pids"]}
    assert s["expires_at"] > s["created_at"]
    assert is_mounted(session_dir(sid))
    got = admin.get(f"/sessions/{sid}").json()
    assert got["session_id"] == sid and got["labels"] == {"team": "a"}
    listed = admin.get("/sessions?state=live&limit=200").json()
    assert sid in [i["session_id"] for i in listed["items"]]
    assert {"items", "total", "limit", "offset", "has_more"} <= set(listed)
    d = admin.delete(f"/sessions/{sid}")
    assert d.status_code == 200 and d.json()["deleted"] is True, d.text
    assert d.json()["workspace_freed"] is True
    assert not is_mounted(session_dir(sid)) and not os.path.exists(session_dir(sid))
    assert admin.get(f"/sessions/{sid}").json()["state"] == "deleted"
    again = admin.delete(f"/sessions/{sid}")
    assert again.status_code == 200 and again.json()["deleted"] is False


def test_two_runs_share_files_and_inherit(admin, session):
    sid = session["session_id"]
    first, _ = run_in(admin, sid, ["sh", "-c", "echo from-run-one > note.txt; id -u"])
    assert first["phase"] == "completed", first
    assert first["session_id"] == sid and first["base_image"] == "python:3.11-slim"
    second, fr = run_in(admin, sid, ["sh", "-c", "cat note.txt; id -u; echo data >> note.txt"])
    assert second["phase"] == "completed", second
    lines = output(fr).decode().split()
    assert lines[0] == "from-run-one"
    # A run may write what the previous one left, whatever its uid.
    third, fr = run_in(admin, sid, ["cat", "note.txt"])
    assert output(fr) == b"from-run-one\ndata\n"


def test_session_env_and_limits_are_inherited(admin):
    s = new_session(admin, env={"A": "session", "B": "session"},
                    resources={"memory_mb": 96}, timeout_sec=7)
    try:
        final, fr = run_in(admin, s["session_id"], ["sh", "-c", "echo $A $B"],
                           env={"B": "run"})
        assert output(fr).decode().split() == ["session", "run"]
        assert final["resource_usage"]["limits"]["memory_mb"] == 96
        assert final["timeout_sec"] == 7
        # A run's own resources still override the session's.
        final, _ = run_in(admin, s["session_id"], ["true"], resources={"memory_mb": 64})
        assert final["resource_usage"]["limits"]["memory_mb"] == 64
    finally:
        admin.delete(f"/sessions/{s['session_id']}")


def test_run_in_unknown_or_foreign_session_is_404(admin, user_key):
    r = submit_in(admin, "00000000-0000-4000-8000-000000000000", ["true"])
    body = assert_envelope(r, 404, "not_found")
    assert "POST /sessions" in body["error"]["message"]
    s = new_session(admin)
    try:
        alice = Client(admin.base, user_key)
        assert_envelope(submit_in(alice, s["session_id"], ["true"]), 404, "not_found")
        assert_envelope(alice.get(f"/sessions/{s['session_id']}"), 404, "not_found")
        assert_envelope(alice.delete(f"/sessions/{s['session_id']}"), 404, "not_found")
        assert s["session_id"] not in [i["session_id"] for i in
                                       alice.get("/sessions").json()["items"]]
    finally:
        admin.delete(f"/sessions/{s['session_id']}")
    # Ended: the message says what to do.
    body = assert_envelope(submit_in(admin, s["session_id"], ["true"]), 404, "not_found")
    assert "deleted" in body["error"]["message"] and "POST /sessions" in body["error"]["message"]
    # base_image and session_id together: 422.
    r = submit(admin, body={"session_id": s["session_id"], "command": ["true"]})
    assert_envelope(r, 422, "invalid_request")


def test_thread_id_gets_or_creates(admin):
    a = new_session(admin, thread_id="thread-42")
    b = new_session(admin, thread_id="thread-42")
    try:
        assert b["session_id"] == a["session_id"] and b["reused"] is True
        c = new_session(admin, thread_id="thread-43")
        assert c["session_id"] != a["session_id"] and c["reused"] is False
        admin.delete(f"/sessions/{c['session_id']}")
    finally:
        admin.delete(f"/sessions/{a['session_id']}")
    # Once ended, the thread gets a new session.
    d = new_session(admin, thread_id="thread-42")
    assert d["session_id"] != a["session_id"] and d["reused"] is False
    admin.delete(f"/sessions/{d['session_id']}")


def test_thread_id_concurrent_creates_one_session(admin):
    ids = []

    def create():
        ids.append(new_session(admin, thread_id="thread-race")["session_id"])
    ts = [threading.Thread(target=create) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(set(ids)) == 1, ids
    admin.delete(f"/sessions/{ids[0]}")


def test_idempotency_key_on_sessions(admin):
    import uuid
    h = {"Idempotency-Key": "sess-key-" + uuid.uuid4().hex}
    a = new_session(admin, headers=h, ttl_sec=60)
    b = new_session(admin, headers=h, ttl_sec=60)
    assert a["session_id"] == b["session_id"]
    r = admin.post("/sessions", data=json.dumps({"spec_version": "1.0", "base_image": "bash",
                                                 "ttl_sec": 60}),
                   headers={"Content-Type": "application/json", **h})
    body = assert_envelope(r, 409, "idempotency_conflict")
    assert body["error"]["details"]["prior_id"] == a["session_id"]
    admin.delete(f"/sessions/{a['session_id']}")


def test_validation_errors(admin):
    def post(body):
        return admin.post("/sessions", data=json.dumps(body),
                          headers={"Content-Type": "application/json"})
    assert_envelope(post({"base_image": "bash"}), 400, "invalid_spec_version")
    assert_envelope(post({"spec_version": "1.0"}), 400, "invalid_request")
    assert_envelope(post({"spec_version": "1.0", "base_image": "nope:1"}), 400, "invalid_request")
    assert_envelope(post({"spec_version": "1.0", "base_image": "bash", "bogus": 1}),
                    400, "invalid_request")
    assert_envelope(post({"spec_version": "1.0", "base_image": "bash", "ttl_sec": 5}),
                    400, "invalid_request")
    assert_envelope(post({"spec_version": "1.0", "base_image": "bash",
                          "network_policy": "allow_all"}), 400, "policy_unsupported")
    r = post({"spec_version": "1.0", "base_image": "bash", "runtime": "firecracker"})
    assert_envelope(r, 503, "runtime_unavailable")


def test_ttl_expiry_frees_the_workspace(admin):
    s = new_session(admin, ttl_sec=10)
    sid = s["session_id"]
    # Activity extends expires_at.
    time.sleep(1.2)
    final, _ = run_in(admin, sid, ["true"])
    later = admin.get(f"/sessions/{sid}").json()
    assert later["expires_at"] > s["expires_at"]
    # Expired within one sweep interval (1 s here) plus a heartbeat tick.
    assert wait_for(lambda: admin.get(f"/sessions/{sid}").json()["state"] == "expired",
                    timeout=20)
    assert wait_for(lambda: not is_mounted(session_dir(sid)), timeout=5)
    assert not os.path.exists(session_dir(sid))
    body = assert_envelope(submit_in(admin, sid, ["true"]), 404, "not_found")
    assert "expired" in body["error"]["message"]
    ev = psql(f"SELECT event FROM audit_events WHERE session_id = '{sid}'"
              " AND event LIKE 'sandbox.session.%' ORDER BY id")
    assert [e[0] for e in ev] == ["sandbox.session.created", "sandbox.session.expired"]


def test_delete_with_running_run_kills_it(admin):
    s = new_session(admin)
    sid = s["session_id"]
    r = submit_in(admin, sid, ["sleep", "60"])
    rid = r.json()["run_id"]
    queued = submit_in(admin, sid, ["true"]).json()["run_id"]
    wait_phase(admin, rid, "running")
    t0 = time.monotonic()
    d = admin.delete(f"/sessions/{sid}")
    assert d.status_code == 200 and d.json()["runs_killed"] == 2, d.text
    final = wait_run(admin, rid, timeout=15)
    assert final["phase"] == "killed" and final["reason_code"] == "session_deleted", final
    assert time.monotonic() - t0 < 10
    other = wait_run(admin, queued, timeout=15)
    assert other["phase"] == "killed" and other["reason_code"] == "session_deleted"
    fr = admin.get(f"/runs/{queued}/logs").json()
    assert [f["event"] for f in fr if f["type"] == "event"][-1] == "end"
    assert wait_for(lambda: not os.path.exists(session_dir(sid)), timeout=10)


def test_runs_of_a_session_take_turns(admin, session):
    sid = session["session_id"]
    ids = [submit_in(admin, sid, ["sh", "-c", "date +%s.%N; sleep 0.5; date +%s.%N"])
           .json()["run_id"] for _ in range(3)]
    spans = []
    for rid in ids:
        final = wait_run(admin, rid)
        assert final["phase"] == "completed", final
        a, b = output(admin.get(f"/runs/{rid}/logs").json()).decode().split()
        spans.append((float(a), float(b)))
    spans.sort()
    for (a1, b1), (a2, b2) in zip(spans, spans[1:]):
        assert a2 >= b1, spans


def test_workspace_cap_inside_a_run(admin, session):
    sid = session["session_id"]
    final, fr = run_in(admin, sid, ["sh", "-c",
                                    "dd if=/dev/zero of=big bs=1M count=100 2>&1; echo rc=$?"])
    out = output(fr).decode()
    assert "No space left on device" in out and "rc=1" in out, out
    # The session still works, and what fit is there.
    final, fr = run_in(admin, sid, ["sh", "-c", "rm big; echo ok"])
    assert output(fr) == b"ok\n"


def test_session_quota(user_key):
    alice = Client(BASE_URL, user_key)
    made = []
    try:
        for _ in range(6):
            made.append(new_session(alice, base_image="bash")["session_id"])
        r = alice.post("/sessions", data=json.dumps({"spec_version": "1.0", "base_image": "bash"}),
                       headers={"Content-Type": "application/json"})
        body = assert_envelope(r, 429, "quota_exceeded")
        assert body["error"]["details"]["reason"] == "sessions"
        assert body["error"]["details"]["limit"] == 6
        assert body["error"]["details"]["scope"] == "user"
    finally:
        for sid in made:
            alice.delete(f"/sessions/{sid}")


def test_max_lifetime_bounds_a_busy_session(admin):
    s = new_session(admin, ttl_sec=600)
    sid = s["session_id"]
    assert s["max_expires_at"] >= s["expires_at"]
    # As if created SANDBOX_SESSION_MAX_LIFETIME ago, less 3 seconds.
    psql(f"UPDATE sessions SET max_expires_at = now() + interval '3 seconds' WHERE id = '{sid}'")
    run_in(admin, sid, ["true"])  # activity cannot carry it past the bound
    got = admin.get(f"/sessions/{sid}").json()
    assert got["expires_at"] <= got["max_expires_at"]
    assert wait_for(lambda: admin.get(f"/sessions/{sid}").json()["state"] == "expired", timeout=20)
    assert admin.get(f"/sessions/{sid}").json()["reason"] == "max_lifetime"
