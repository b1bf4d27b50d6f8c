"""PostgreSQL goes away and comes back: /readyz says so, the api keeps
its processes."""
import os
import subprocess

from conftest import STACK, stack_script, wait_for


def _api_pids():
    master = open(os.path.join(STACK, "pids", "api.pid")).read().strip()
    kids = subprocess.run(["pgrep", "-P", master], capture_output=True,
                          text=True).stdout.split()
    return master, sorted(kids)


def test_readyz_follows_postgres(anon, admin):
    before = _api_pids()
    assert len(before[1]) == 4
    stack_script("pg-stop", STACK)
    try:
        def down():
            r = anon.get("/readyz")
            return r if r.status_code == 503 else None
        r = wait_for(down, timeout=15)
        assert r is not None, "readyz stayed 200 with PostgreSQL stopped"
        body = r.json()
        assert body["error"]["code"] == "not_ready"
        assert "postgres" in body["error"]["details"]["failing"]
        assert "postgres" in body["error"]["message"]
        # Authenticated endpoints fail cleanly, in the envelope.
        r2 = admin.get("/runtimes")
        assert r2.status_code == 503
        assert r2.json()["error"]["code"] == "service_unavailable"
    finally:
        stack_script("pg-start", STACK)
    r = wait_for(lambda: anon.get("/readyz").status_code == 200, timeout=30)
    assert r, anon.get("/readyz").text
    assert admin.get("/runtimes").status_code == 200
    assert _api_pids() == before, "api processes were restarted"
