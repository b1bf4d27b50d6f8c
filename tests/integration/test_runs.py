"""POST /runs and GET /runs/{id}: validation, the state machine, output,
usage, ownership (PRD §9)."""
import base64
import json
import time

from conftest import (BASE_URL, RUNTIME, Client, assert_envelope, effective_config, frames,
                      output, py, run, submit, wait_run)


def test_hello_python_completes_with_output_and_usage(admin):
    final, fr = run(admin, **py("import sys; print('hello'); print('oops', file=sys.stderr)"))
    assert final["phase"] == "completed", final
    assert final["exit_code"] == 0 and final["reason_code"] is None
    assert output(fr) == b"hello\n" and output(fr, "stderr") == b"oops\n"
    assert [f["seq"] for f in fr] == list(range(1, len(fr) + 1))
    ends = [f for f in fr if f["type"] == "event" and f["event"] == "end"]
    assert len(ends) == 1 and ends[0] is fr[-1]
    assert ends[0]["data"] == {"exit_code": 0, "phase": "completed", "reason_code": None}
    u = final["resource_usage"]
    for k in ("cpu_time_sec", "wall_time_sec", "peak_rss_mb", "log_bytes", "artifact_bytes",
              "pids", "limits"):
        assert k in u, k
    assert u["log_bytes"] == len("hello\n") + len("oops\n")
    assert u["limits"]["memory_mb"] == 512 and u["limits"]["timeout_sec"] == 60
    assert final["runtime"] == RUNTIME
    assert final["runtime_version"].startswith("crun" if RUNTIME == "oci" else "docker")
    assert final["image_digest"].startswith("sha256:")
    assert len(final["policy_hash"]) == 64
    for k in ("created_at", "started_at", "finished_at"):
        assert final[k].endswith("Z"), k


def test_every_image_runs(admin):
    for image, cmd, want in [("node:20-alpine", ["node", "-e", "console.log(6*7)"], b"42\n"),
                             ("bash", ["bash", "-c", "echo $((6*7))"], b"42\n"),
                             ("python", ["python3", "-c", "print(6*7)"], b"42\n")]:
        final, fr = run(admin, base_image=image, command=cmd)
        assert final["phase"] == "completed", (image, final)
        assert output(fr) == want


def test_nonzero_exit_fails(admin):
    final, _ = run(admin, **py("raise SystemExit(3)"))
    assert final["phase"] == "failed" and final["exit_code"] == 3
    assert final["reason_code"] == "nonzero_exit"


def test_missing_program_is_exec_failed(admin):
    final, _ = run(admin, base_image="bash", command=["/no/such/program"])
    assert final["phase"] == "failed" and final["reason_code"] == "exec_failed"
    assert "No such file" in final["message"]


def test_inline_files_env_and_cwd(admin):
    files = [{"path": "pkg/data.txt", "content_b64": base64.b64encode(b"from a file").decode()},
             {"path": "main.py", "content_b64": base64.b64encode(
                 b"import os\nprint(open('pkg/data.txt').read(), os.environ['GREETING'], os.getcwd())"
             ).decode()}]
    final, fr = run(admin, base_image="python", command=["python3", "main.py"], files=files,
                    env={"GREETING": "hi there"})
    assert final["phase"] == "completed", (final, fr)
    assert output(fr) == b"from a file hi there /workspace\n"


def test_true_peak_memory_and_cpu_are_measured(admin):
    code = ("import time\nb = bytearray(120 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "del b\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n")
    final, _ = run(admin, **py(code))
    assert final["phase"] == "completed", final
    u = final["resource_usage"]
    # Freed before the end: only a high-water mark can still see it.
    assert u["peak_rss_mb"] >= 120, u
    assert u["cpu_time_sec"] >= 0.45, u
    assert u["wall_time_sec"] >= 0.45, u


def test_resources_are_clamped_to_the_maxima(admin):
    cfg = effective_config()
    final, _ = run(admin, **py("pass", resources={"cpu": 999, "memory_mb": 10 ** 9}))
    lim = final["resource_usage"]["limits"]
    assert lim["cpu"] == float(cfg["SANDBOX_MAX_CPU"])
    assert lim["memory_mb"] == int(cfg["SANDBOX_MAX_MEM_MB"])


def test_invalid_utf8_output_is_base64_and_split_characters_survive(admin):
    code = ("import os, time\nos.write(1, b'\\xff\\xfe')\ntime.sleep(0.1)\n"
            "os.write(1, '\\u20ac'.encode()[:1])\ntime.sleep(0.2)\nos.write(1, '\\u20ac'.encode()[1:] + b'!')\n")
    final, fr = run(admin, **py(code))
    assert output(fr) == b"\xff\xfe\xe2\x82\xac!"
    encs = [f["encoding"] for f in fr if f["type"] == "stdout"]
    assert encs[0] == "base64"
    assert any(f["type"] == "stdout" and f["encoding"] == "utf8" and "\u20ac" in f["data"]
               for f in fr), fr


def test_log_cap_truncates_once_and_the_run_still_ends(admin):
    cap = int(effective_config()["SANDBOX_MAX_LOG_BYTES"])
    final, fr = run(admin, timeout=60, base_image="bash", command=["bash", "-c", "yes | head -c 5000000; echo done"])
    assert final["phase"] == "completed", final
    trunc = [f for f in fr if f["type"] == "truncated"]
    assert len(trunc) == 1 and trunc[0]["reason"] == "log_cap"
    assert len(output(fr)) == cap
    assert final["resource_usage"]["log_bytes"] == cap
    assert fr[-1]["event"] == "end"


def test_spec_version_is_checked(admin):
    r = submit(admin, spec_version="0.9", command=["true"])
    body = assert_envelope(r, 400, "invalid_spec_version")
    assert body["error"]["details"] == {"supported": ["1.0", "1.1"], "provided": "0.9"}
    r = admin.post("/runs", data=json.dumps({"base_image": "python", "command": ["true"]}),
                   headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_spec_version")


def test_session_or_base_image_exactly_one(admin):
    r = admin.post("/runs", data=json.dumps({"spec_version": "1.0", "command": ["true"]}),
                   headers={"Content-Type": "application/json"})
    body = assert_envelope(r, 422, "invalid_request")
    assert body["error"]["details"]["fields"] == ["session_id", "base_image"]
    r = submit(admin, session_id="x", command=["true"])
    assert_envelope(r, 422, "invalid_request")


def test_unknown_image_lists_the_available_ones(admin):
    r = submit(admin, base_image="ruby:3.3", command=["ruby", "-v"])
    body = assert_envelope(r, 400, "invalid_request")
    assert "ruby:3.3" in body["error"]["message"]
    assert {"python", "python:3.11-slim", "node:20-alpine", "shell"} <= set(
        body["error"]["details"]["available"])
    r = submit(admin, base_image="python@sha256:" + "0" * 64, command=["true"])
    assert_envelope(r, 400, "invalid_request")


def test_bad_fields_are_named(admin):
    cases = [
        ({"command": []}, 400, "invalid_request", "command"),
        ({"command": "ls"}, 400, "invalid_request", "command"),
        ({"command": ["a\u0000b"]}, 400, "invalid_request", "command"),
        ({"command": ["true"], "timeout_sec": 0}, 400, "invalid_request", "timeout_sec"),
        ({"command": ["true"], "timeout_sec": 1.5}, 400, "invalid_request", "timeout_sec"),
        ({"command": ["true"], "startup_timeout_sec": 99999}, 400, "invalid_request", "startup_timeout_sec"),
        ({"command": ["true"], "env": {"1BAD": "x"}}, 400, "invalid_request", "env"),
        ({"command": ["true"], "resources": {"cpu": -1}}, 400, "invalid_request", "resources.cpu"),
        ({"command": ["true"], "resources": {"gpu": 1}}, 400, "invalid_request", "resources"),
        ({"command": ["true"], "network_policy": "allow_all"}, 400, "policy_unsupported", None),
        ({"command": ["true"], "bogus": 1}, 400, "invalid_request", None),
        ({"command": ["true"], "files": [{"path": "../x", "content_b64": ""}]}, 400, "invalid_request", "files"),
        ({"command": ["true"], "files": [{"path": "/etc/x", "content_b64": ""}]}, 400, "invalid_request", "files"),
        ({"command": ["true"], "files": [{"path": "a/./b", "content_b64": ""}]}, 400, "invalid_request", "files"),
        ({"command": ["true"], "files": [{"path": "a", "content_b64": "***"}]}, 400, "invalid_request", "files"),
    ]
    for fields, status, code, field in cases:
        body = assert_envelope(submit(admin, **fields), status, code)
        if field:
            assert body["error"]["details"].get("field") == field, (fields, body)
    body = assert_envelope(submit(admin, command=["true"], bogus=1, other=2), 400, "invalid_request")
    assert sorted(body["error"]["details"]["unknown_fields"]) == ["bogus", "other"]


def test_inline_files_over_1_mib_are_refused(admin):
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    r = submit(admin, command=["true"], files=[{"path": "big", "content_b64": big}])
    body = assert_envelope(r, 413, "payload_too_large")
    assert body["error"]["details"]["max_bytes"] == 1024 * 1024
    ok = base64.b64encode(b"x" * (1024 * 1024)).decode()
    final, fr = run(admin, **py("import os; print(os.path.getsize('big'))",
                                files=[{"path": "big", "content_b64": ok}]))
    assert output(fr) == b"1048576\n"


def test_unavailable_runtimes_are_503(admin):
    for rt in ("firecracker",):
        body = assert_envelope(submit(admin, runtime=rt, command=["true"]), 503, "runtime_unavailable")
        d = body["error"]["details"]
        assert d["runtime"] == rt and d["available"] is False and "oci" in d["suggested"]
    assert_envelope(submit(admin, runtime="vmware", command=["true"]), 400, "invalid_request")


def test_json_body_rules(admin):
    r = admin.post("/runs", data="{not json", headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_request")
    r = admin.post("/runs", data="[1]", headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_request")
    r = admin.post("/runs", data="{}", headers={"Content-Type": "text/plain"})
    assert_envelope(r, 415, "invalid_request")
    deep = "[" * 100 + "]" * 100
    r = admin.post("/runs", data='{"a":' + deep + "}", headers={"Content-Type": "application/json"})
    assert_envelope(r, 400, "invalid_request")


def test_other_users_runs_are_not_found(admin, user_key):
    alice = Client(BASE_URL, user_key)
    r = submit(admin, **py("print(1)"))
    rid = r.json()["run_id"]
    wait_run(admin, rid)
    for method, path in [("GET", f"/runs/{rid}"), ("GET", f"/runs/{rid}/logs"),
                         ("POST", f"/runs/{rid}/cancel")]:
        assert_envelope(alice.request(method, path), 404, "not_found")
    assert_envelope(admin.get("/runs/not-a-uuid"), 404, "not_found")
    assert_envelope(admin.get("/runs/00000000-0000-4000-8000-000000000000"), 404, "not_found")


def test_logs_from_seq(admin):
    final, fr = run(admin, **py("print(1); print(2)"))
    tail = admin.get(f"/runs/{final['id']}/logs?from_seq=3").json()
    assert tail == [f for f in fr if f["seq"] >= 3]
    assert_envelope(admin.get(f"/runs/{final['id']}/logs?from_seq=0"), 400, "invalid_request")
