"""sql/inspect.sql: every query runs against the live schema and finds
what it should."""
import os
import subprocess

from conftest import ROOT, STACK, py, run


def test_every_inspect_query_runs(admin):
    final, _ = run(admin, **py("print('inspect me')"))
    r = subprocess.run(
        ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-v", f"run_id={final['id']}",
         "-v", "user_id=admin", "-h", os.path.join(STACK, "run", "pg"), "-U", "sandbox",
         "-d", "sandbox", "-f", os.path.join(ROOT, "sql", "inspect.sql")],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    sections = [l for l in out.splitlines() if l.startswith("== ")]
    assert len(sections) == 14, sections
    assert "sandbox.run.completed" in out  # the run's audit trail
    assert final["id"] in out and final["policy_hash"] in out
    assert "python" in out and "sha256:" in out  # the catalog
    assert "004_interactive.sql" in out
