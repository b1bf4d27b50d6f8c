"""make bench, docker part: POST -> terminal for `true` on the docker
runtime through nginx, beside a bare Engine API create/start/wait/remove
of the same image with the same HostConfig (taken from one of our runs),
measured in the same run, and beside the oci runtime."""
import http.client
import json
import os
import socket
import sys
import time

from bench_runs import N, S, URL, pct, wait

STACK = os.environ["TEST_STACK_DIR"]
SOCK = os.path.join(STACK, "run", "docker.sock")


class UnixConn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("docker")

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(SOCK)


def engine(conn, method, path, body=None):
    conn.request(method, "/v1.41" + path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"} if body is not None else {})
    r = conn.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data.strip().startswith((b"{", b"[")) else data)


def post(runtime, cmd):
    r = S.post(URL + "/runs", data=json.dumps(
        {"spec_version": "1.0", "runtime": runtime, "base_image": "bash", "command": cmd}))
    r.raise_for_status()
    return r.json()["run_id"]


def captured_config():
    """Config and HostConfig of a real run, minus what ties it to that run."""
    rid = post("docker", ["sleep", "5"])
    conn = UnixConn()
    for _ in range(500):
        st, c = engine(conn, "GET", f"/containers/sbx-{rid}/json")
        if st == 200:
            break
        time.sleep(0.01)
    S.post(f"{URL}/runs/{rid}/cancel")
    wait(rid)
    cfg = {k: c["Config"][k] for k in ("Image", "User", "WorkingDir", "Env")}
    cfg["Image"] = c["Image"]
    cfg["Cmd"] = ["true"]
    hc = c["HostConfig"]
    keep = ("NetworkMode", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "Tmpfs", "PidsLimit",
            "Memory", "MemorySwap", "NanoCpus", "Ulimits", "OomScoreAdj")
    cfg["HostConfig"] = {k: hc[k] for k in keep}
    return cfg


def bare(cfg, n):
    conn = UnixConn()
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        st, c = engine(conn, "POST", f"/containers/create?name=bench-bare-{i}", cfg)
        assert st == 201, c
        cid = c["Id"]
        st, _ = engine(conn, "POST", f"/containers/{cid}/start", {})
        assert st == 204, st
        st, w = engine(conn, "POST", f"/containers/{cid}/wait", {})
        assert st == 200 and w["StatusCode"] == 0, w
        st, _ = engine(conn, "DELETE", f"/containers/{cid}?force=1")
        times.append((time.perf_counter() - t0) * 1000)
    return times


def ours(runtime, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        b = wait(post(runtime, ["true"]))
        assert b["phase"] == "completed", b
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main():
    if not os.path.exists(SOCK):
        print("# docker: no dockerd in this stack; skipped")
        return 0
    n = max(10, N // 3)
    cfg = captured_config()
    b = bare(cfg, n)
    d = ours("docker", n)
    o = ours("oci", n)
    print(f"# docker runtime: {n} sequential runs of `true` per case")
    print(f"{'case':<34}{'p50 ms':>9}{'p95 ms':>9}")
    for name, xs in [("bare Engine API create..remove", b), ("ours, docker (client)", d),
                     ("ours, oci (client)", o)]:
        print(f"{name:<34}{pct(xs, 50):9.1f}{pct(xs, 95):9.1f}")
    print(f"ratio p50 docker: ours/bare {pct(d, 50) / pct(b, 50):.2f} (target <= 1.1); "
          f"docker/oci {pct(d, 50) / pct(o, 50):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
