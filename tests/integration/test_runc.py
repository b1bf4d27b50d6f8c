"""The `oci` runtime on runc instead of crun (SANDBOX_OCI_RUNTIME=runc):
the same probe and hostile programs, on a stack of its own."""
import os
import subprocess

import pytest

from conftest import output, private_stack, py, run, submit, wait_for, wait_phase, wait_run
from test_isolation import HOSTILE, _check, probe


@pytest.fixture(scope="module")
def runc_stack():
    conf = "SANDBOX_OCI_RUNTIME = runc\nSANDBOX_WORKSPACE_CAP_MB = 64\nSANDBOX_CANCEL_GRACE_SECONDS = 2"
    with private_stack("sandbox-runc.", conf) as st:
        yield st


def test_runc_is_what_runs(runc_stack):
    _, c = runc_stack
    rts = {r["name"]: r for r in c.get("/runtimes").json()["runtimes"]}
    assert rts["oci"]["available"] and rts["oci"]["runtime_version"].startswith("runc")
    final, fr = run(c, **py("print('hello from runc')"))
    assert final["phase"] == "completed" and output(fr) == b"hello from runc\n"
    assert final["runtime_version"].startswith("runc")


def test_runc_probe(runc_stack):
    _, c = runc_stack
    rep = probe(c)
    assert rep["uid"] != 0 and rep["CapEff"] == "0000000000000000"
    assert rep["CapBnd"] == "0000000000000000"
    assert rep["NoNewPrivs"] == "1" and rep["Seccomp"] == "2"
    assert rep["write_root"] == "EROFS" and rep["exec_workspace"] == "EACCES"
    assert rep["interfaces"] == ["lo"] and max(rep["pids_visible"]) < 100


@pytest.mark.parametrize("name", ["memory_bomb", "fork_bomb", "network", "syscalls",
                                  "sleep_past_timeout", "disk_fill", "open_files"])
def test_runc_hostile(runc_stack, name):
    d, c = runc_stack
    final, fr = run(c, timeout=90, **HOSTILE[name])
    _check(name, final, fr)
    containers = lambda: subprocess.run(
        ["runc", "--root", os.path.join(d, "data", "oci-state"), "list", "-q"],
        capture_output=True, text=True).stdout.split()
    assert wait_for(lambda: containers() == [], timeout=15), containers()


def test_runc_cancel(runc_stack):
    _, c = runc_stack
    rid = submit(c, base_image="bash", command=["sleep", "30"]).json()["run_id"]
    assert wait_phase(c, rid, "running")
    c.post(f"/runs/{rid}/cancel")
    final = wait_run(c, rid, timeout=15)
    assert final["phase"] == "killed" and final["reason_code"] == "canceled_by_user"
