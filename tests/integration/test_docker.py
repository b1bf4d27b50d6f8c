"""The docker runtime: what only docker has (the Engine API's view of a
sandbox, reconciliation, dockerd going away). Everything runtime-neutral
runs again on docker with the same assertions (scripts/test.sh)."""
import json
import os
import subprocess
import time

import pytest

from conftest import (STACK, assert_envelope, frames, output, psql, py, run, submit, wait_for,
                      wait_phase, wait_run)

SOCK = os.path.join(STACK, "run", "docker.sock")
pytestmark = pytest.mark.skipif(not os.path.exists(SOCK), reason="no dockerd in this stack")


def engine(method, path, body=None):
    cmd = ["curl", "-s", "--unix-socket", SOCK, "-X", method, "http://d/v1.41" + path]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.stdout.strip().startswith(("{", "[")) else r.stdout


def test_runtimes_report_docker_with_its_version(admin):
    rts = {r["name"]: r for r in admin.get("/runtimes").json()["runtimes"]}
    assert rts["docker"]["available"] is True
    assert rts["docker"]["runtime_version"] == "docker " + engine("GET", "/version")["Version"]


def test_hostconfig_carries_the_hardening(admin):
    r = submit(admin, runtime="docker", command=["sleep", "30"], resources={"cpu": 0.5, "memory_mb": 128})
    rid = r.json()["run_id"]
    wait_phase(admin, rid, "running")
    c = engine("GET", f"/containers/sbx-{rid}/json")
    hc, cfg = c["HostConfig"], c["Config"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"] and not hc.get("CapAdd")
    assert "no-new-privileges" in hc["SecurityOpt"]
    assert any(o.startswith("seccomp=") for o in hc["SecurityOpt"])
    assert hc["Memory"] == hc["MemorySwap"] == 128 << 20
    assert hc["NanoCpus"] == 500_000_000 and hc["PidsLimit"] > 0
    assert {u["Name"] for u in hc["Ulimits"]} == {"nofile", "nproc", "core"}
    assert "noexec" in hc["Tmpfs"]["/tmp"]
    uid = int(cfg["User"].split(":")[0])
    assert uid >= 1000
    assert cfg["Labels"]["sandbox.run_id"] == rid and cfg["Labels"]["sandbox.node_id"]
    assert not c["NetworkSettings"]["Networks"].get("bridge")
    admin.post(f"/runs/{rid}/cancel")
    final = wait_run(admin, rid)
    assert final["phase"] == "killed"
    assert wait_for(lambda: engine("GET", f"/containers/sbx-{rid}/json").get("message", "")
                    .startswith("No such container"), timeout=15)


def test_orphaned_labelled_containers_are_removed(admin):
    node = psql("SELECT node_id FROM nodes ORDER BY heartbeat_at DESC LIMIT 1")[0][0]
    img = engine("GET", "/images/json")[0]["Id"]
    made = engine("POST", "/containers/create?name=sbx-00000000-0000-4000-8000-00000000abcd",
                  {"Image": img, "Cmd": ["true"], "Labels": {"sandbox.managed": "true",
                                                              "sandbox.node_id": node}})
    assert "Id" in made, made
    assert wait_for(lambda: engine("GET", "/containers/sbx-00000000-0000-4000-8000-00000000abcd/json")
                    .get("message", "").startswith("No such container"), timeout=20)


def test_dockerd_restart_mid_run_fails_the_run_clearly(admin):
    r = submit(admin, runtime="docker", **py("import time; print('up', flush=True); time.sleep(60)"))
    rid = r.json()["run_id"]
    wait_phase(admin, rid, "running")
    pid = int(open(os.path.join(STACK, "pids", "dockerd.pid")).read())
    os.kill(pid, 15)
    final = wait_run(admin, rid, timeout=60)
    assert final["phase"] == "failed" and final["reason_code"] == "runtime_lost", final
    # The stack's dockerd comes back; later runs work again.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env["STACK_DOCKER"] = "1"
    from conftest import ROOT, BASE_URL
    # dockerd may take a while to stop (its containers, containerd): a
    # new one is started only once the old one is gone, or the old one's
    # exit would remove the new one's socket.
    assert wait_for(lambda: subprocess.run(["kill", "-0", str(pid)],
                                           stderr=subprocess.DEVNULL).returncode != 0,
                    timeout=120)
    port = BASE_URL.rsplit(":", 1)[1]
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "stack.sh"), "up", STACK, port],
                   env=env, check=True, capture_output=True, timeout=180)
    def works():
        # 503 runtime_unavailable until the supervisor's next probe
        # (every SANDBOX_RUNTIME_PROBE_SEC) has seen the new dockerd.
        r = submit(admin, runtime="docker", **py("print('back')"))
        if r.status_code != 202:
            assert r.status_code == 503 and r.json()["error"]["code"] == "runtime_unavailable", r.text
            return False
        f = wait_run(admin, r.json()["run_id"])
        return f["phase"] == "completed" and output(frames(admin, f["id"])) == b"back\n"
    assert wait_for(works, timeout=60, interval=2)


def test_supervisor_crash_leaves_no_container(admin):
    import signal
    from conftest import BASE_URL, ROOT, docker_containers
    rid = submit(admin, runtime="docker", command=["sleep", "60"]).json()["run_id"]
    wait_phase(admin, rid, "running")
    assert f"/sbx-{rid}" in docker_containers()
    os.kill(int(open(os.path.join(STACK, "pids", "supervisor.pid")).read()), signal.SIGKILL)
    time.sleep(0.5)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env["STACK_DOCKER"] = "1"
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "stack.sh"), "up", STACK,
                    BASE_URL.rsplit(":", 1)[1]], env=env, check=True, capture_output=True,
                   timeout=180)
    final = wait_run(admin, rid, timeout=30)
    assert final["phase"] == "failed" and final["reason_code"] == "supervisor_restart", final
    assert wait_for(lambda: docker_containers() == [], timeout=20), docker_containers()
