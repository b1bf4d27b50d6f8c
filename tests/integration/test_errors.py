"""The error contract on the wire: PRD envelope everywhere, RFC 7807 on
request, 404/405/413."""
import os
import socket
import ssl

from conftest import BASE_URL, CERT, STACK, assert_envelope, wait_for


def test_unknown_route_is_404_envelope(admin):
    body = assert_envelope(admin.get("/no/such/thing"), 404, "not_found")
    assert "/api/v1/sandbox/no/such/thing" in body["error"]["message"]


def test_wrong_method_is_405_with_allow(admin):
    r = admin.request("DELETE", "/runtimes")
    body = assert_envelope(r, 405, "method_not_allowed")
    assert r.headers["Allow"] == "GET"
    assert body["error"]["details"]["allow"] == "GET"


def test_problem_json_negotiation(anon):
    r = anon.get("/runtimes", headers={"Accept": "application/problem+json"})
    assert r.status_code == 401
    assert r.headers["Content-Type"].startswith("application/problem+json")
    p = r.json()
    assert p["status"] == 401
    assert p["type"].endswith("unauthorized")
    assert p["title"] and p["detail"]
    assert p["extensions"]["code"] == "unauthorized"
    assert p["request_id"] == r.headers["X-Request-Id"]
    # Without the header the PRD envelope comes back.
    assert_envelope(anon.get("/runtimes"), 401, "unauthorized")


def _post_big(size, accept="application/json"):
    """Send headers announcing `size` bytes and only start the body; a
    refusal must arrive without the server reading it."""
    host, port = BASE_URL.split("//")[1].split(":")
    ctx = ssl.create_default_context(cafile=CERT)
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall((f"POST /api/v1/sandbox/runs HTTP/1.1\r\nHost: {host}\r\n"
                       f"Content-Type: application/json\r\nAccept: {accept}\r\n"
                       f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode())
            s.sendall(b"{" + b" " * 65535)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode(), body


def test_65_mb_body_refused_by_nginx_before_any_worker():
    head, body = _post_big(65 * 1024 * 1024)
    assert head.startswith("HTTP/1.1 413"), head
    assert "application/json" in head
    import json
    rid = [l.split(": ", 1)[1] for l in head.split("\r\n")
           if l.lower().startswith("x-request-id")][0]
    doc = json.loads(body)
    assert doc["error"]["code"] == "payload_too_large"
    from conftest import effective_config
    limit = int(effective_config()["SANDBOX_MAX_UPLOAD_MB"])
    assert doc["error"]["details"]["max_bytes"] == limit * 1024 * 1024
    assert doc["request_id"] == rid
    # No api worker ever saw that request.
    with open(os.path.join(STACK, "logs", "api.log")) as f:
        assert rid not in f.read()
    # nginx did, and logged it as 413.
    assert wait_for(lambda: rid in open(os.path.join(STACK, "logs", "access.log")).read())


def test_413_in_problem_form():
    head, body = _post_big(65 * 1024 * 1024, accept="application/problem+json")
    assert head.startswith("HTTP/1.1 413"), head
    assert "application/problem+json" in head
    import json
    doc = json.loads(body)
    assert doc["status"] == 413 and doc["extensions"]["code"] == "payload_too_large"
