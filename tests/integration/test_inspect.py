"""sql/inspect.sql: every query runs against the live schema and finds
what it should."""
import os
import subprocess

from conftest import ROOT, STACK, py, run


def test_every_inspect_query_runs(admin):
    final, _ = run(admin, capture_patterns=["*.txt"],
                   **py("open('inspect.txt', 'w').write('x'); print('inspect me')"))
    r = subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-v", f"run_id={final['id']}",
         "-v", "user_id=admin", "-h", os.path.join(STACK, "run", "pg"), "-U", "sandbox",
         "-d", "sandbox", "-f", os.path.join(ROOT, "sql", "inspect.sql")],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    sections = [l for l in out.splitlines() if l.startswith("== ")]
    assert len(sections) == 17, sections
    assert "inspect.txt" in out  # the run's artifacts
    assert "sandbox_runs_completed_total" in out
    assert "sandbox.run.completed" in out  # the run's audit trail
    assert final["id"] in out and final["policy_hash"] in out
    assert "python" in out and "sha256:" in out  # the catalog
    assert "004_interactive.sql" in out


LIST_QUERIES = {
    "admin runs, newest": "SELECT id FROM runs ORDER BY created_at DESC LIMIT 50",
    "admin runs by user": "SELECT id FROM runs WHERE user_id = 'admin' ORDER BY created_at DESC LIMIT 50",
    "admin runs by phase": "SELECT id FROM runs WHERE phase = 'failed' ORDER BY created_at DESC LIMIT 50",
    "admin runs by runtime": "SELECT id FROM runs WHERE runtime = 'oci' ORDER BY created_at DESC LIMIT 50",
    "admin runs by image": "SELECT id FROM runs WHERE base_image = 'bash' ORDER BY created_at DESC LIMIT 50",
    "admin runs by digest": "SELECT id FROM runs WHERE image_digest = 'sha256:x' ORDER BY created_at DESC LIMIT 50",
    "admin runs by node": "SELECT id FROM runs WHERE node_id = 'n' ORDER BY created_at DESC LIMIT 50",
    "admin runs by text": "SELECT id FROM runs WHERE (base_image || ' ' || coalesce(message, '')) ILIKE '%%timeout%%'",
    "admin runs by start": "SELECT id FROM runs WHERE running_at >= now() - interval '1 hour' ORDER BY running_at DESC LIMIT 50",
    "admin runs by finish": "SELECT id FROM runs WHERE finished_at >= now() - interval '1 hour' ORDER BY finished_at DESC LIMIT 50",
    "admin idempotency": "SELECT key FROM idempotency WHERE endpoint = 'runs' ORDER BY created_at DESC LIMIT 50",
    "user's sessions": "SELECT id FROM sessions WHERE user_id = 'admin' ORDER BY created_at DESC LIMIT 50",
    "session's runs": "SELECT id FROM runs WHERE session_id = '00000000-0000-4000-8000-000000000000' ORDER BY created_at",
    "run's artifacts": "SELECT path FROM artifacts WHERE run_id = '00000000-0000-4000-8000-000000000000' ORDER BY path",
    "run's audit": "SELECT event FROM audit_events WHERE run_id = '00000000-0000-4000-8000-000000000000' ORDER BY id",
    "queue": "SELECT id FROM runs WHERE phase = 'queued' ORDER BY created_at LIMIT 8",
    "user's queued runs": "SELECT count(*) FROM runs WHERE phase = 'queued' AND user_id = 'admin'",
    "user's runs today": "SELECT count(*) FROM runs WHERE user_id = 'admin' AND created_at >= date_trunc('day', now(), 'UTC')",
    "sessions to expire": "SELECT id FROM sessions WHERE state IN ('provisioning', 'ready') AND expires_at <= now()",
}


PARTIAL = ("runs_queued_idx", "runs_user_queued_idx", "runs_active_node_idx",
           "runs_active_user_idx", "sessions_live_expiry_idx", "runs_running_at_idx",
           "runs_finished_idx")


def plain(q):
    """The filter alone: without ORDER BY/LIMIT the planner cannot prefer
    walking the created_at index whatever the data looks like, so a
    filter column without an index shows up."""
    import re
    if " WHERE " in q:
        q = re.sub(r" ORDER BY .*$", "", q)
    return q.replace("%%", "%")


def test_every_list_query_is_served_by_an_index():
    """With sequential scans priced out, each list query must find an
    index to use; a Seq Scan in its plan means none exists."""
    for name, q in LIST_QUERIES.items():
        r = subprocess.run(
            ["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", os.path.join(STACK, "run", "pg"),
             "-U", "sandbox", "-d", "sandbox", "-c", "SET enable_seqscan = off",
             "-c", "EXPLAIN " + plain(q)],
            capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert "Seq Scan" not in r.stdout, (name, r.stdout)
        # An index that only orders a full walk does not serve a filter:
        # the condition is the index's (Cond) or its predicate (no Filter).
        # A partial index (its predicate is the condition) also serves it.
        partial = any(f"using {i} " in r.stdout or f"on {i}" in r.stdout for i in PARTIAL)
        if " WHERE " in q:
            assert ("Index Cond" in r.stdout or "Recheck Cond" in r.stdout or partial
                    or "Filter:" not in r.stdout), (name, r.stdout)


def test_the_index_check_can_fail():
    r = subprocess.run(
        ["psql", "-X", "-At", "-h", os.path.join(STACK, "run", "pg"), "-U", "sandbox",
         "-d", "sandbox", "-c", "SET enable_seqscan = off",
         "-c", "EXPLAIN " + plain("SELECT id FROM runs WHERE exit_code = 3 ORDER BY created_at LIMIT 5")],
        capture_output=True, text=True, timeout=30)
    # Unindexed: a sequential scan (or a full index walk with a Filter).
    assert "Seq Scan" in r.stdout or ("Filter:" in r.stdout and "Index Cond" not in r.stdout), r.stdout
