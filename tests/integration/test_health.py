"""Liveness, readiness and request ids."""
from conftest import assert_envelope


def test_healthz_needs_no_key(anon):
    r = anon.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}
    assert len(r.headers["X-Request-Id"]) >= 16


def test_readyz_reports_each_dependency(anon):
    r = anon.get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    checks = body["checks"]
    assert checks["postgres"]["ok"] is True
    assert checks["supervisor"]["ok"] is True
    assert checks["supervisor"]["live_nodes"] >= 1
    assert set(checks["runtimes"]) == {"oci", "docker", "firecracker"}
    # The embedded default runtime really runs containers here.
    assert checks["runtimes"]["oci"]["available"] is True
    assert checks["runtimes"]["firecracker"]["available"] is False


def test_sane_request_id_is_honoured(anon):
    r = anon.get("/healthz", headers={"X-Request-Id": "trace-abc.123:x"})
    assert r.headers["X-Request-Id"] == "trace-abc.123:x"


def test_insane_request_id_is_replaced(anon):
    for bad in ["has space", "x" * 200, "quote\"s", "semi;colon"]:
        r = anon.get("/nope", headers={"X-Request-Id": bad})
        rid = r.headers["X-Request-Id"]
        assert rid != bad and len(rid) >= 16
        body = assert_envelope(r, 404, "not_found")
        assert body["request_id"] == rid
