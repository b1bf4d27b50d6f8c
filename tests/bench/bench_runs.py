"""make bench: run latency and throughput through nginx, beside bare
`crun run` of the same bundle measured in the same run (BENCH_OCI=runsc:
the stack runs gVisor, and the bare figure is `runsc run`).

Prints, for `true` and `python3 -c pass`:
  - bare crun run (fork+exec of crun, create, start, wait, delete)
  - POST -> terminal phase as the server records it (created_at ->
    finished_at) and as a client observes it (POST, then GET every 2 ms)
  - the ratio of our p50 to bare crun's p50
and runs/second at saturation (many runs submitted at once)."""
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import requests

STACK = os.environ["TEST_STACK_DIR"]
env = dict(l.strip().split("=", 1) for l in open(os.path.join(STACK, "dev.env")))
URL = env["SANDBOX_URL"] + "/api/v1/sandbox"
S = requests.Session()
S.trust_env = False
S.verify = os.path.join(STACK, "tls", "ca.pem")
S.headers.update({"X-API-KEY": env["SANDBOX_API_KEY"], "Content-Type": "application/json"})
N = int(os.environ.get("BENCH_N", "60"))
OCI = os.environ.get("BENCH_OCI", "crun")
# The global flags the supervisor gives each binary (runtime_oci.c).
OCI_FLAGS = {"runsc": ["--network=none", "--oci-seccomp", "--host-fifo=open"]}.get(OCI, [])
TERMINAL = {"completed", "failed", "timed_out", "killed"}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def post(image, cmd):
    r = S.post(URL + "/runs", data=json.dumps(
        {"spec_version": "1.0", "base_image": image, "command": cmd}))
    r.raise_for_status()
    return r.json()["run_id"]


def wait(rid, interval=0.002):
    while True:
        b = S.get(f"{URL}/runs/{rid}").json()
        if b["phase"] in TERMINAL:
            return b
        time.sleep(interval)


def psql(sql):
    return subprocess.run(["psql", "-X", "-At", "-h", os.path.join(STACK, "run", "pg"),
                           "-U", "sandbox", "-d", "sandbox", "-c", sql],
                          capture_output=True, text=True, check=True).stdout.split()


def capture_bundle():
    """The bundle the supervisor writes for a real run, copied while the
    run sleeps."""
    rid = post("python", ["sleep", "5"])
    d = os.path.join(STACK, "data", "runs", rid)
    for _ in range(500):
        p = os.path.join(d, "config.json")
        if os.path.exists(p) and b"sleep" in open(p, "rb").read():
            cfg = json.load(open(p))
            break
        time.sleep(0.01)
    S.post(f"{URL}/runs/{rid}/cancel")
    wait(rid)
    return cfg


def bare_crun(cfg, cmd, n):
    tmp = tempfile.mkdtemp(prefix="sandbox-bench.")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    maps = cfg["linux"].get("uidMappings")
    uid = int(cfg["process"]["args"][2]) + (maps[0]["hostID"] if maps else 0)
    os.chown(ws, uid, uid)
    cfg = json.loads(json.dumps(cfg))
    args = cfg["process"]["args"]
    cfg["process"]["args"] = args[:args.index("--") + 1] + cmd
    reader = None
    for m in cfg["mounts"]:
        if m["destination"] == "/workspace":
            m["source"] = ws
        if m["destination"] == "/.sandbox-status":
            # runsc's status FIFO needs a reader, as the supervisor is one.
            m["source"] = os.path.join(tmp, "status")
            os.mkfifo(m["source"], 0o600)
            reader = os.open(m["source"], os.O_RDONLY | os.O_NONBLOCK)
    cfg["linux"]["cgroupsPath"] = "/sandbox/bench-bare"
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
    state = os.path.join(tmp, "state")
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        subprocess.run([OCI, "--root", state, *OCI_FLAGS, "run", "--bundle", tmp, f"bench-{i}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t0) * 1000)
        if reader is not None:
            while True:
                try:
                    if not os.read(reader, 65536):
                        break
                except BlockingIOError:
                    break
    if reader is not None:
        os.close(reader)
    if OCI == "runsc":
        for i in range(n):
            subprocess.run([OCI, "--root", state, "delete", "--force", f"bench-{i}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(tmp, ignore_errors=True)
    return times


def ours(image, cmd, n):
    client, ids = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        rid = post(image, cmd)
        b = wait(rid)
        client.append((time.perf_counter() - t0) * 1000)
        assert b["phase"] == "completed", b
        ids.append(rid)
    id_list = ",".join(f"'{i}'" for i in ids)
    server = [float(x) for x in psql(
        "SELECT extract(epoch FROM finished_at - created_at) * 1000 FROM runs "
        f"WHERE id IN ({id_list})")]
    return client, server


def saturation(n):
    """n runs submitted by 8 client threads at once; done when the last
    one is terminal (watched in the database, so polling clients do not
    compete with the service for the two cores)."""
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        ids = list(ex.map(lambda _: post("bash", ["true"]), range(n)))
    id_list = ",".join(f"'{i}'" for i in ids)
    while True:
        left = int(psql(f"SELECT count(*) FROM runs WHERE id IN ({id_list}) "
                        "AND phase NOT IN ('completed','failed','timed_out','killed')")[0])
        if left == 0:
            break
        time.sleep(0.02)
    t1 = float(psql(f"SELECT extract(epoch FROM max(finished_at) - min(created_at)) "
                    f"FROM runs WHERE id IN ({id_list})")[0])
    bad = psql(f"SELECT count(*) FROM runs WHERE id IN ({id_list}) AND phase <> 'completed'")[0]
    assert bad == "0", bad
    return n / t1, n / (time.perf_counter() - t0)


def main():
    cfg = capture_bundle()
    print(f"# sandbox bench ({OCI}): {N} sequential runs per case, one stack on this machine")
    print(f"{'case':<28}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    rows = {}
    for label, image, cmd in [("true", "bash", ["true"]),
                              ("python3 -c pass", "python", ["python3", "-c", "pass"])]:
        bare = bare_crun(cfg, cmd, N)
        client, server = ours(image, cmd, N)
        for name, xs in [(f"bare {OCI} run: {label}", bare),
                         (f"server: {label}", server),
                         (f"client: {label}", client)]:
            print(f"{name:<28}{pct(xs, 50):9.1f}{pct(xs, 95):9.1f}{pct(xs, 99):9.1f}")
        rows[label] = (pct(bare, 50), pct(server, 50), pct(client, 50), pct(client, 95))
    print()
    for label, (b, s, c, c95) in rows.items():
        print(f"ratio p50 {label}: server/bare {s / b:.2f}, client/bare {c / b:.2f}"
              f"  (target <= 1.5); client p95 {c95:.1f} ms")
    if OCI != "crun":
        return 0
    rps, rps_client = saturation(max(200, N * 3))
    print(f"saturation: {rps:.1f} runs/s first created -> last finished "
          f"({rps_client:.1f} as the client saw it; target >= 40 on 2 cores)")


if __name__ == "__main__":
    sys.exit(main())
