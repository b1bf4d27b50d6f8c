"""Live output over WebSocket, through nginx and TLS (PRD "WebSocket
Protocol Details", "Signed WS URLs", "Resume from sequence")."""
import asyncio
import base64
import json
import os
import socket
import ssl
import time
import urllib.parse

import websockets

from conftest import (ADMIN_KEY, BASE_URL, CERT, STACK, Client, assert_envelope, frames,
                      output, py, submit, wait_for, wait_phase, wait_run)

SSL = ssl.create_default_context(cafile=CERT)


async def _collect(url, headers=None, limit=None, timeout=40):
    got = []
    async with websockets.connect(url, ssl=SSL, extra_headers=headers or {},
                                  max_size=2 ** 20, open_timeout=10) as ws:
        async def reader():
            async for m in ws:
                got.append(json.loads(m))
                if limit and len(got) >= limit:
                    return
        await asyncio.wait_for(reader(), timeout)
        closed_cleanly = ws.close_code in (None, 1000)
    return got, closed_cleanly


def collect(url, **kw):
    return asyncio.run(_collect(url, **kw))


def start(client, **fields):
    r = submit(client, **fields)
    assert r.status_code == 202, r.text
    return r.json()


def ws_url(run_id, **q):
    url = BASE_URL.replace("https://", "wss://") + f"/api/v1/sandbox/runs/{run_id}/stream"
    return url + ("?" + urllib.parse.urlencode(q) if q else "")


def decoded(fr, stream="stdout"):
    return output(fr, stream)


def check_shapes(fr):
    assert [f["seq"] for f in fr] == list(range(fr[0]["seq"], fr[0]["seq"] + len(fr)))
    for f in fr:
        t = f["type"]
        assert t in ("stdout", "stderr", "event", "heartbeat", "truncated"), f
        if t in ("stdout", "stderr"):
            assert set(f) == {"type", "encoding", "data", "seq"} and f["encoding"] in ("utf8", "base64")
        elif t == "event":
            assert set(f) == {"type", "event", "data", "seq"}
            assert f["event"] in ("start", "phase", "end", "error", "resume", "stdin_closed")
        elif t == "heartbeat":
            assert set(f) == {"type", "ts", "seq"} and f["ts"].endswith("Z")
        else:
            assert f == {"type": "truncated", "reason": "log_cap", "seq": f["seq"]}
    assert len(json.dumps(fr[-1])) <= 65536


def test_signed_url_streams_everything_without_headers(admin):
    run = start(admin, base_image="bash",
                command=["bash", "-c", "for i in 1 2 3; do echo line $i; sleep 0.2; done"])
    url = run["log_stream_url"]
    q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert set(q) == {"token", "exp"} and len(q["token"][0]) == 64
    fr, clean = collect(url)
    check_shapes(fr)
    assert fr[0]["seq"] == 1
    assert decoded(fr) == b"line 1\nline 2\nline 3\n"
    ends = [f for f in fr if f["type"] == "event" and f["event"] == "end"]
    assert len(ends) == 1 and fr[-1] is ends[0]
    assert ends[0]["data"]["exit_code"] == 0 and ends[0]["data"]["phase"] == "completed"
    assert clean
    # The same stream equals the recorded one.
    assert fr == frames(admin, run["run_id"])


def test_header_auth_and_late_client_gets_full_history(admin):
    run = start(admin, **py("print('a'); print('b')"))
    wait_run(admin, run["run_id"])
    fr, _ = collect(ws_url(run["run_id"]), headers={"X-API-KEY": ADMIN_KEY})
    assert fr == frames(admin, run["run_id"]) and fr[-1]["event"] == "end"
    fr2, _ = collect(ws_url(run["run_id"]), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert fr2 == fr


def test_bad_tokens_are_refused_before_any_upgrade(admin, user_key):
    run = start(admin, **py("print(1)"))
    other = start(admin, **py("print(2)"))
    q = urllib.parse.parse_qs(urllib.parse.urlparse(run["log_stream_url"]).query)
    tok, exp = q["token"][0], q["exp"][0]
    tampered = ("0" if tok[0] != "0" else "1") + tok[1:]
    cases = [
        ws_url(run["run_id"], token=tampered, exp=exp),                       # altered
        ws_url(run["run_id"], token=tok, exp="2030-01-01T00:00:00Z"),         # exp changed
        ws_url(other["run_id"], token=tok, exp=exp),                          # another run
        ws_url(run["run_id"]),                                                # nothing
        ws_url(run["run_id"], token=tok),                                     # no exp
    ]
    for url in cases:
        try:
            collect(url)
            raise AssertionError(f"accepted: {url}")
        except websockets.exceptions.InvalidStatusCode as e:
            assert e.status_code == 401, (url, e.status_code)
    # An expired token: made with the right secret for an expiry in the past.
    secret = [l.split("=", 1)[1].strip() for l in open(os.path.join(STACK, "sandbox.conf"))
              if l.startswith("SANDBOX_WS_SIGNING_SECRET")][0]
    import hashlib, hmac
    past = "2020-01-01T00:00:00Z"
    t = hmac.new(secret.encode(), f"{run['run_id']}\n{past}".encode(), hashlib.sha256).hexdigest()
    try:
        collect(ws_url(run["run_id"], token=t, exp=past))
        raise AssertionError("expired token accepted")
    except websockets.exceptions.InvalidStatusCode as e:
        assert e.status_code == 401
    # A valid key of another user: not found.
    try:
        collect(ws_url(run["run_id"]), headers={"X-API-KEY": user_key})
        raise AssertionError("stranger accepted")
    except websockets.exceptions.InvalidStatusCode as e:
        assert e.status_code == 404
    # Not a WebSocket: 426 in the envelope.
    r = admin.get(f"/runs/{run['run_id']}/stream")
    assert_envelope(r, 426, "invalid_request")
    # The secret is in no answer and no log.
    assert secret not in json.dumps(run)
    for f in os.listdir(os.path.join(STACK, "logs")):
        assert secret not in open(os.path.join(STACK, "logs", f), errors="replace").read()


def test_utf8_split_and_binary_output_over_ws(admin):
    code = ("import os, time\nos.write(1, b'\\xff\\xfe')\ntime.sleep(0.1)\n"
            "e = '\\u20ac'.encode()\nos.write(1, e[:1]); time.sleep(0.2); os.write(1, e[1:])\n")
    run = start(admin, **py(code))
    fr, _ = collect(run["log_stream_url"])
    assert decoded(fr) == b"\xff\xfe\xe2\x82\xac"
    assert [f["encoding"] for f in fr if f["type"] == "stdout"][0] == "base64"


def test_log_cap_gives_one_truncated_frame(admin):
    run = start(admin, base_image="bash", command=["bash", "-c", "yes | head -c 3000000"])
    fr, _ = collect(run["log_stream_url"])
    check_shapes(fr)
    assert sum(1 for f in fr if f["type"] == "truncated") == 1
    assert len(decoded(fr)) == 1048576 and fr[-1]["event"] == "end"


def test_two_clients_see_identical_frames(admin):
    run = start(admin, base_image="bash",
                command=["bash", "-c", "for i in $(seq 1 20); do echo $i; sleep 0.05; done"])
    url = run["log_stream_url"]

    async def both():
        return await asyncio.gather(_collect(url), _collect(url))
    (a, _), (b, _) = asyncio.run(both())
    assert a == b and a[-1]["event"] == "end"
    assert decoded(a) == "".join(f"{i}\n" for i in range(1, 21)).encode()


def test_from_seq_inside_and_beyond_retention(admin):
    run = start(admin, base_image="bash", command=["bash", "-c", "for i in $(seq 1 80); do echo $i; sleep 0.005; done"])
    final = wait_run(admin, run["run_id"])
    allf = frames(admin, run["run_id"])
    last = allf[-1]["seq"]
    # Inside retention: exactly from there.
    fr, _ = collect(ws_url(run["run_id"], from_seq=last - 5), headers={"X-API-KEY": ADMIN_KEY})
    assert fr == allf[-6:]
    # Beyond: a resume event first (the test stack keeps 50 frames of replay).
    fr, _ = collect(ws_url(run["run_id"], from_seq=2), headers={"X-API-KEY": ADMIN_KEY})
    first = last - 50 + 1
    assert fr[0]["type"] == "event" and fr[0]["event"] == "resume"
    assert fr[0]["data"] == {"requested_from_seq": 2, "delivered_from_seq": first,
                             "lost_count": first - 2}
    assert fr[0]["seq"] == first and fr[1:] == [f for f in allf if f["seq"] >= first]
    # resume_from_seq on POST /runs lands in log_stream_url.
    r = submit(admin, resume_from_seq=7, **py("print(1)")).json()
    assert "from_seq=7" in r["log_stream_url"]


def test_cancel_mid_stream_gives_one_killed_end(admin):
    run = start(admin, base_image="bash", command=["bash", "-c", "echo go; sleep 30"])

    async def watch():
        got = []
        async with websockets.connect(run["log_stream_url"], ssl=SSL) as ws:
            async for m in ws:
                f = json.loads(m)
                got.append(f)
                if f["type"] == "stdout":
                    await asyncio.get_event_loop().run_in_executor(
                        None, lambda: admin.post(f"/runs/{run['run_id']}/cancel"))
        return got
    fr = asyncio.run(asyncio.wait_for(watch(), 30))
    ends = [f for f in fr if f.get("event") == "end"]
    assert len(ends) == 1 and ends[0]["data"]["phase"] == "killed"
    assert ends[0]["data"]["reason_code"] == "canceled_by_user"


def test_timeout_end_frame_and_heartbeats(admin):
    run = start(admin, base_image="bash", command=["sleep", "60"], timeout_sec=12)
    fr, _ = collect(run["log_stream_url"], timeout=40)
    check_shapes(fr)
    hb = [f for f in fr if f["type"] == "heartbeat"]
    assert len(hb) >= 1, fr
    assert fr[-1]["event"] == "end" and fr[-1]["data"]["reason_code"] == "execution_timeout"
    # No heartbeat after the end.
    assert fr[-1]["seq"] > max(f["seq"] for f in hb)


def _supervisor_sockets():
    pid = open(os.path.join(STACK, "pids", "supervisor.pid")).read().strip()
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def _raw_ws(run_id):
    """A client that upgrades and then never reads."""
    host, port = BASE_URL.split("//")[1].split(":")
    raw = socket.create_connection((host, int(port)))
    s = SSL.wrap_socket(raw, server_hostname="localhost")
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET /api/v1/sandbox/runs/{run_id}/stream HTTP/1.1\r\nHost: {host}\r\n"
               f"X-API-KEY: {ADMIN_KEY}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0], head
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return s


def test_stalled_client_does_not_slow_anyone_and_sockets_are_released(admin):
    before = _supervisor_sockets()
    run = start(admin, base_image="bash",
                command=["bash", "-c", "sleep 1; yes 0123456789abcdef | head -c 1000000; sleep 1"])
    stalled = [_raw_ws(run["run_id"]) for _ in range(2)]
    t0 = time.monotonic()
    fr, _ = collect(run["log_stream_url"], timeout=60)
    took = time.monotonic() - t0
    assert fr[-1]["event"] == "end" and len(decoded(fr)) == 1000000
    assert took < 15, took
    final = wait_run(admin, run["run_id"])
    assert final["phase"] == "completed" and final["resource_usage"]["wall_time_sec"] < 10
    for s in stalled:
        s.close()
    assert wait_for(lambda: _supervisor_sockets() <= before, timeout=15), (before, _supervisor_sockets())


async def _interactive(run, sends, until_end=True, timeout=30):
    """Connect, send client frames (dicts, or ('sleep', s)), collect."""
    got = []
    async with websockets.connect(run["log_stream_url"], ssl=SSL, max_size=2 ** 20) as ws:
        async def reader():
            async for m in ws:
                got.append(json.loads(m))
        rt = asyncio.create_task(reader())
        for s in sends:
            if isinstance(s, tuple):
                await asyncio.sleep(s[1])
            else:
                await ws.send(json.dumps(s))
        await asyncio.wait_for(rt, timeout)
    return got


ECHO = ["python3", "-c", "import sys\nfor l in sys.stdin: print(l.strip().upper(), flush=True)\nprint('eof')"]


def test_interactive_echo_round_trip(admin):
    run = start(admin, spec_version="1.1", interactive=True, base_image="python", command=ECHO)
    b64 = base64.b64encode(b"second\n").decode()
    fr = asyncio.run(_interactive(run, [
        {"type": "stdin", "encoding": "utf8", "data": "first\n"},
        {"type": "stdin", "encoding": "base64", "data": b64},
        {"type": "stdin", "encoding": "utf8", "data": "th"}, {"type": "stdin", "encoding": "utf8", "data": "ird\n"},
        {"type": "stdin_close"}]))
    assert decoded(fr) == b"FIRST\nSECOND\nTHIRD\neof\n"
    closed = [f for f in fr if f.get("event") == "stdin_closed"]
    assert len(closed) == 1 and closed[0]["data"] == {"reason": "client_closed"}
    assert fr[-1]["event"] == "end" and fr[-1]["data"]["exit_code"] == 0
    got = admin.get(f"/runs/{run['run_id']}").json()
    assert got["interactive"] is True and got["stdin_limits"]["stdin_max_bytes"] == 1048576


def _limit_case(admin, fields, sends):
    run = start(admin, spec_version="1.1", interactive=True, base_image="python",
                command=ECHO, timeout_sec=20, **fields)
    fr = asyncio.run(_interactive(run, sends))
    closed = [f for f in fr if f.get("event") == "stdin_closed"]
    assert len(closed) == 1, fr
    assert fr[-1]["event"] == "end" and fr[-1]["data"]["exit_code"] == 0  # EOF ends it
    return closed[0]["data"]["reason"], decoded(fr)


def test_interactive_limits(admin):
    reason, out = _limit_case(admin, {"stdin_max_frame_bytes": 8},
                              [{"type": "stdin", "data": "ok\n"},
                               {"type": "stdin", "data": "too long a frame\n"},
                               {"type": "stdin", "data": "after\n"}])
    assert reason == "stdin_max_frame_bytes" and out == b"OK\neof\n"
    reason, out = _limit_case(admin, {"stdin_max_bytes": 10},
                              [{"type": "stdin", "data": "12345\n"},
                               {"type": "stdin", "data": "67890\n"}])
    assert reason == "stdin_max_bytes" and out == b"12345\neof\n"
    reason, out = _limit_case(admin, {"stdin_bps": 10},
                              [{"type": "stdin", "data": "abcdef\n"},
                               {"type": "stdin", "data": "ghijkl\n"}])
    assert reason == "stdin_bps" and out == b"ABCDEF\neof\n"
    reason, out = _limit_case(admin, {"stdin_idle_timeout_sec": 1},
                              [{"type": "stdin", "data": "hi\n"}])
    assert reason == "stdin_idle_timeout_sec" and out == b"HI\neof\n"


def test_interactive_fields_need_spec_1_1(admin):
    r = submit(admin, interactive=True, command=["cat"])
    body = assert_envelope(r, 400, "invalid_request")
    assert body["error"]["details"]["requires_spec_version"] == "1.1"
    assert_envelope(submit(admin, spec_version="1.1", interactive=True, stdin_bps=0,
                           command=["cat"]), 400, "invalid_request")
    # 1.0 runs are unchanged: stdin is empty, so cat ends at once.
    final, fr = run_cat(admin)
    assert final["phase"] == "completed" and output(fr) == b""


def run_cat(admin):
    from conftest import run as run_
    return run_(admin, base_image="bash", command=["cat"])


def test_stream_counters_are_reported(admin):
    from conftest import psql
    run_ = start(admin, **py("print(1)"))
    collect(run_["log_stream_url"])
    def stats():
        rows = psql("SELECT stats::text FROM nodes ORDER BY heartbeat_at DESC LIMIT 1")
        return json.loads(rows[0][0])
    s = wait_for(lambda: stats() if stats().get("ws_connections_opened", 0) >= 1 else None,
                 timeout=10)
    assert s, stats()
    for k in ("ws_connections_opened", "ws_disconnects", "ws_heartbeats_sent",
              "ws_queue_drops", "ws_clients", "runs_in_flight"):
        assert isinstance(s[k], int), k


def test_a_client_reading_nothing_for_a_minute_delays_no_one(admin):
    """Two clients that upgrade and then read nothing stay connected for a
    minute while the run writes a line every 50 ms; a reading client gets
    every line within a second of it being written, and the run takes no
    longer than it would alone."""
    code = ("import time, sys\nend = time.time() + 60\n"
            "while time.time() < end:\n"
            "    sys.stdout.write('%.6f %s\\n' % (time.time(), 'x' * 400)); sys.stdout.flush()\n"
            "    time.sleep(0.05)\n")
    run_ = start(admin, timeout_sec=120, **py(code))
    stalled = [_raw_ws(run_["run_id"]) for _ in range(2)]

    async def reader():
        worst, lines = 0.0, 0
        async with websockets.connect(run_["log_stream_url"], ssl=SSL, max_size=2 ** 20) as ws:
            async for m in ws:
                now = time.time()
                f = json.loads(m)
                if f["type"] == "stdout" and f["encoding"] == "utf8":
                    for line in f["data"].splitlines():
                        worst = max(worst, now - float(line.split()[0]))
                        lines += 1
        return worst, lines
    worst, lines = asyncio.run(asyncio.wait_for(reader(), 100))
    final = wait_run(admin, run_["run_id"])
    assert final["phase"] == "completed", final
    assert lines > 900, lines
    assert worst < 1.0, worst
    assert final["resource_usage"]["wall_time_sec"] < 63
    for s in stalled:
        s.close()
