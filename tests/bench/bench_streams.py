"""make bench, streams: (1) p50/p99 from a line written inside the sandbox
to its frame arriving at a WebSocket client through nginx and TLS; (2) how
many concurrent stream clients one supervisor holds with heartbeats
flowing to all of them."""
import asyncio
import json
import os
import resource
import ssl
import sys
import time

import requests
import websockets

STACK = os.environ["TEST_STACK_DIR"]
env = dict(l.strip().split("=", 1) for l in open(os.path.join(STACK, "dev.env")))
URL = env["SANDBOX_URL"] + "/api/v1/sandbox"
KEY = env["SANDBOX_API_KEY"]
S = requests.Session()
S.trust_env = False
S.verify = os.path.join(STACK, "tls", "ca.pem")
S.headers.update({"X-API-KEY": KEY, "Content-Type": "application/json"})
SSL = ssl.create_default_context(cafile=os.path.join(STACK, "tls", "ca.pem"))
CLIENTS = int(os.environ.get("BENCH_STREAM_CLIENTS", "1000"))


def post(cmd, **extra):
    r = S.post(URL + "/runs", data=json.dumps(
        {"spec_version": "1.0", "base_image": "python", "command": cmd, **extra}))
    r.raise_for_status()
    return r.json()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def latency():
    code = ("import time, sys\ntime.sleep(1)\nfor i in range(300):\n"
            "    sys.stdout.write('%.6f\\n' % time.time()); sys.stdout.flush(); time.sleep(0.01)\n")
    run = post(["python3", "-c", code])
    url = run["log_stream_url"].split("?")[0]
    lat = []
    async with websockets.connect(url, ssl=SSL, extra_headers={"X-API-KEY": KEY},
                                  max_size=2 ** 20) as ws:
        async for m in ws:
            now = time.time()
            f = json.loads(m)
            if f["type"] == "stdout":
                for line in f["data"].splitlines():
                    lat.append((now - float(line)) * 1000)
    return lat


async def many():
    run = post(["sleep", "40"], timeout_sec=60)
    url = run["log_stream_url"].split("?")[0]
    got_hb = 0
    opened = 0
    errors = []

    async def one():
        nonlocal got_hb, opened
        try:
            async with websockets.connect(url, ssl=SSL, extra_headers={"X-API-KEY": KEY},
                                          open_timeout=60, ping_interval=None) as ws:
                opened += 1
                async for m in ws:
                    if json.loads(m)["type"] == "heartbeat":
                        got_hb += 1
                        return
        except Exception as e:  # counted, and the first few reasons shown
            errors.append(repr(e)[:160])

    t0 = time.time()
    tasks = [asyncio.create_task(one()) for _ in range(CLIENTS)]
    await asyncio.wait(tasks, timeout=35)
    for t in tasks:
        t.cancel()
    S.post(f"{URL}/runs/{run['run_id']}/cancel")
    for e in sorted(set(errors))[:3]:
        print("  client error:", e, f"(x{errors.count(e)})")
    return opened, got_hb, time.time() - t0


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    lat = asyncio.run(latency())
    print(f"stream latency (line written in the sandbox -> frame at a WSS client), "
          f"{len(lat)} lines: p50 {pct(lat, 50):.2f} ms, p99 {pct(lat, 99):.2f} ms "
          f"(target p99 <= 5 ms; PRD 200 ms)")
    opened, hb, took = asyncio.run(many())
    print(f"concurrent stream clients on one run: {opened} connected, {hb} received a "
          f"heartbeat within {took:.0f} s (target 1000)")


if __name__ == "__main__":
    sys.exit(main())
