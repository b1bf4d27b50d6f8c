"""The audit trail: one append-only row and one JSON log line per event of
the PRD's list, with who, source, what, policy and outcome; no code, no
secrets."""
import subprocess
import os

from conftest import STACK, ADMIN_KEY, log_lines, psql, py, run, submit, wait_for, wait_phase, wait_run


def _events(run_id):
    return psql(f"SELECT event, user_id, source, runtime, base_image, image_digest, "
                f"policy_hash, spec_version, outcome::text, request_id "
                f"FROM audit_events WHERE run_id = '{run_id}' ORDER BY id")


def test_run_events_rows_and_log_lines(admin):
    final, _ = run(admin, headers={"X-Sandbox-Source": "IDE"},
                   **py("print('secret code 1234')", env={"TOKEN": "s3cr3t-value"}))
    rows = _events(final["id"])
    assert [r[0] for r in rows] == ["sandbox.run.created", "sandbox.run.queued",
                                    "sandbox.run.starting", "sandbox.run.running",
                                    "sandbox.run.completed"]
    for r in rows:
        assert r[1] == "admin" and r[2] == "IDE" and r[3] == "oci"
        assert r[4] == "python:3.11-slim" and r[5] == final["image_digest"]
        assert r[6] == final["policy_hash"] and r[7] == "1.0"
    assert '"exit_code": 0' in rows[-1][8] and '"phase": "completed"' in rows[-1][8]
    dump = " ".join(" ".join(r) for r in rows)
    assert "secret code" not in dump and "s3cr3t" not in dump and "print(" not in dump
    # The same events as JSON log lines, tied to the creating request.
    want = {r[0] for r in rows}
    lines = [l for l in log_lines("api.log") + log_lines("supervisor.log")
             if l.get("run_id") == final["id"] and l.get("event")]
    assert want == {l["event"] for l in lines}, lines
    rid = rows[0][9]
    assert all(l.get("request_id") == rid for l in lines)
    assert all(l.get("policy_hash") == final["policy_hash"] for l in lines)
    for f in os.listdir(os.path.join(STACK, "logs")):
        text = open(os.path.join(STACK, "logs", f), errors="replace").read()
        assert "s3cr3t-value" not in text and ADMIN_KEY not in text


def test_failures_and_cancels_are_audited(admin):
    final, _ = run(admin, **py("raise SystemExit(2)"))
    assert _events(final["id"])[-1][0] == "sandbox.run.failed"
    rid = submit(admin, base_image="bash", command=["sleep", "30"]).json()["run_id"]
    assert wait_phase(admin, rid, "running")
    admin.post(f"/runs/{rid}/cancel")
    wait_run(admin, rid)
    last = _events(rid)[-1]
    assert last[0] == "sandbox.run.killed" and "canceled_by_user" in last[8]
    final, _ = run(admin, base_image="bash", command=["sleep", "5"], timeout_sec=1)
    last = _events(final["id"])[-1]
    assert last[0] == "sandbox.run.timed_out" and "execution_timeout" in last[8]


def test_audit_is_append_only():
    pg = ["psql", "-X", "-At", "-h", os.path.join(STACK, "run", "pg"), "-U", "sandbox",
          "-d", "sandbox", "-c"]
    r = subprocess.run(pg + ["UPDATE audit_events SET user_id = 'mallory'"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "append-only" in r.stderr
    r = subprocess.run(pg + ["DELETE FROM audit_events"], capture_output=True, text=True)
    assert r.returncode != 0 and "append-only" in r.stderr
    assert int(psql("SELECT count(*) FROM audit_events")[0][0]) > 0
