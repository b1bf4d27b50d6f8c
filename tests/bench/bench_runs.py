"""make bench: run latency and throughput through nginx, beside bare
`crun run` of the same bundle measured in the same run, the two
alternating run by run (BENCH_OCI=runsc: the stack runs gVisor, and the
bare figure is `runsc run`).

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


class Bare:
    """Bare `OCI run` of the captured bundle, one run per call."""

    def __init__(self, cfg, cmd):
        self.tmp = tempfile.mkdtemp(prefix="sandbox-bench.")
        ws = os.path.join(self.tmp, "ws")
        os.mkdir(ws)
        maps = cfg["linux"].get("uidMappings")
        uid = int(cfg["process"]["args"][2]) + (maps[0]["hostID"] if maps else 0)
        os.chown(ws, uid, uid)
        cfg = json.loads(json.dumps(cfg))
        args = cfg["process"]["args"]
        cfg["process"]["args"] = args[:args.index("--") + 1] + cmd
        self.reader = None
        for m in cfg["mounts"]:
            if m["destination"] == "/workspace":
                m["source"] = ws
            if m["destination"] == "/.sandbox-status":
                # runsc's status FIFO needs a reader, as the supervisor is one.
                m["source"] = os.path.join(self.tmp, "status")
                os.mkfifo(m["source"], 0o600)
                self.reader = os.open(m["source"], os.O_RDONLY | os.O_NONBLOCK)
        cfg["linux"]["cgroupsPath"] = "/sandbox/bench-bare"
        json.dump(cfg, open(os.path.join(self.tmp, "config.json"), "w"))
        self.state = os.path.join(self.tmp, "state")
        self.n = 0

    def once(self):
        name = f"bench-{self.n}"
        self.n += 1
        t0 = time.perf_counter()
        subprocess.run([OCI, "--root", self.state, *OCI_FLAGS, "run", "--bundle", self.tmp, name],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ms = (time.perf_counter() - t0) * 1000
        while self.reader is not None:
            try:
                if not os.read(self.reader, 65536):
                    break
            except BlockingIOError:
                break
        if OCI == "runsc":
            subprocess.run([OCI, "--root", self.state, "delete", "--force", name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return ms

    def close(self):
        if self.reader is not None:
            os.close(self.reader)
        shutil.rmtree(self.tmp, ignore_errors=True)


def ours_once(image, cmd):
    t0 = time.perf_counter()
    rid = post(image, cmd)
    b = wait(rid)
    assert b["phase"] == "completed", b
    return rid, (time.perf_counter() - t0) * 1000


def server_times(ids):
    id_list = ",".join(f"'{i}'" for i in ids)
    return [float(x) for x in psql(
        "SELECT extract(epoch FROM finished_at - created_at) * 1000 FROM runs "
        f"WHERE id IN ({id_list})")]


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
        # Bare and ours alternate, run by run, so that a drift in the
        # machine's speed (it is a VM) weighs on both alike.
        runner, bare, client, ids = Bare(cfg, cmd), [], [], []
        for _ in range(N):
            bare.append(runner.once())
            rid, ms = ours_once(image, cmd)
            ids.append(rid)
            client.append(ms)
        runner.close()
        server = server_times(ids)
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
