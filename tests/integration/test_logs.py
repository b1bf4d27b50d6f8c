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


def test_every_line_about_a_run_carries_run_and_request_id(admin):
    import time
    from conftest import py, run
    final, _ = run(admin, headers={"X-Request-Id": "trace-run-7"},
                   capture_patterns=["*.txt"],
                   **py("open('o.txt','w').write('x'); print('hi')"))
    rid = final["id"]
    time.sleep(0.3)  # the supervisor's last lines (crun delete) follow the end
    sup = [l for l in log_lines("supervisor.log") if l.get("run_id") == rid]
    assert len(sup) >= 4, sup
    assert all(l.get("request_id") == "trace-run-7" for l in sup), sup
    events = {l.get("event") for l in sup}
    assert {"sandbox.run.starting", "sandbox.run.running", "sandbox.run.completed"} <= events
    api = [l for l in log_lines("api.log") if l.get("run_id") == rid]
    assert api and all(l["request_id"] == "trace-run-7" for l in api)
    assert {"sandbox.run.created", "sandbox.run.queued"} <= {l.get("event") for l in api}


def test_secrets_never_in_logs_or_answers(admin):
    """The stream-signing secret, the metrics token and API keys appear in
    no log line and no response."""
    import glob
    import re
    from conftest import ADMIN_KEY, STACK, py, run
    conf = open(STACK + "/sandbox.conf").read()
    secrets = [re.search(r"SANDBOX_WS_SIGNING_SECRET = (\S+)", conf).group(1),
               re.search(r"SANDBOX_METRICS_TOKEN = (\S+)", conf).group(1), ADMIN_KEY]
    final, fr = run(admin, env={"API_KEY": "not-a-secret-of-ours"}, **py("print(1)"))
    answers = [admin.get(f"/runs/{final['id']}").text, admin.get("/runtimes").text,
               admin.get(f"/runs/{final['id']}/logs").text, admin.get("/admin/metrics").text,
               admin.get(f"/admin/runs/{final['id']}").text]
    for s in secrets:
        assert len(s) >= 16
        for a in answers:
            assert s not in a
        for f in glob.glob(STACK + "/logs/*.log"):
            assert s not in open(f, errors="replace").read(), (f, s[:6])
