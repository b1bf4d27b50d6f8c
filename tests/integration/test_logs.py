"""Every process logs one JSON object per line, with the request id."""
from conftest import log_lines


def test_api_and_supervisor_log_json(admin):
    r = admin.get("/runtimes", headers={"X-Request-Id": "logtest-42"})
    assert r.status_code == 200
    for name, comp in (("api.log", "sandbox-api"), ("supervisor.log", "sandbox-supervisor")):
        lines = log_lines(name)
        assert lines, name
        for l in lines:
            assert {"ts", "level", "component", "message"} <= set(l), l
            assert l["component"] == comp
            assert l["level"] in ("debug", "info", "warn", "error")
    hits = [l for l in log_lines("api.log") if l.get("request_id") == "logtest-42"]
    assert hits and hits[-1]["path"] == "/api/v1/sandbox/runtimes"
    assert hits[-1]["status"] == "200" and hits[-1]["user_id"] == "admin"


def test_keys_never_logged(admin):
    from conftest import ADMIN_KEY, STACK
    import glob
    admin.get("/runtimes")
    for f in glob.glob(STACK + "/logs/*.log"):
        assert ADMIN_KEY not in open(f, errors="replace").read(), f
