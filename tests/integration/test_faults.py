"""Faults injected through configuration, on a stack of their own: an OCI
runtime that is slow to start sandboxes (startup_timeout_sec) and a queue
whose runs wait too long (queue_ttl_sec)."""
import os
import subprocess

import pytest

from conftest import ROOT, frames, private_stack, submit, wait_for, wait_run


@pytest.fixture(scope="module")
def slow_stack():
    conf = "\n".join([
        "SANDBOX_OCI_RUNTIME = " + os.path.join(ROOT, "tests", "integration", "fixtures", "slow-oci.sh"),
        "SANDBOX_QUEUE_TTL_SEC = 2",
        "SANDBOX_USER_MAX_CONCURRENT_RUNS = 1",
        "SANDBOX_HEARTBEAT_SEC = 1",
    ])
    with private_stack("sandbox-faults.", conf) as st:
        yield st


def _containers(d):
    return subprocess.run(["crun", "--root", os.path.join(d, "data", "oci-state"), "list", "-q"],
                          capture_output=True, text=True).stdout.split()


def test_startup_timeout_is_its_own_outcome(slow_stack):
    d, c = slow_stack
    r = submit(c, base_image="bash", command=["echo", "never"], startup_timeout_sec=1,
               timeout_sec=30)
    final = wait_run(c, r.json()["run_id"], timeout=30)
    assert final["phase"] == "timed_out" and final["reason_code"] == "startup_timeout", final
    assert final["started_at"] is None  # the command never began
    fr = frames(c, final["id"])
    assert not [f for f in fr if f["type"] == "stdout"]
    assert fr[-1]["event"] == "end" and fr[-1]["data"]["reason_code"] == "startup_timeout"
    assert wait_for(lambda: _containers(d) == [], timeout=15), _containers(d)
    # A generous startup timeout succeeds on the same slow runtime; the
    # slow start does not count against timeout_sec.
    r = submit(c, base_image="bash", command=["echo", "slow but fine"], startup_timeout_sec=20,
               timeout_sec=1)
    final = wait_run(c, r.json()["run_id"], timeout=30)
    assert final["phase"] == "completed", final


def test_queue_ttl_expiry(slow_stack):
    d, c = slow_stack
    first = submit(c, base_image="bash", command=["sleep", "4"]).json()["run_id"]
    second = submit(c, base_image="bash", command=["echo", "late"]).json()["run_id"]
    final = wait_run(c, second, timeout=20)
    assert final["phase"] == "failed" and final["reason_code"] == "queue_ttl_expired", final
    fr = frames(c, second)
    assert fr and fr[-1]["event"] == "end" and fr[-1]["data"]["reason_code"] == "queue_ttl_expired"
    assert wait_run(c, first, timeout=30)["phase"] == "completed"
