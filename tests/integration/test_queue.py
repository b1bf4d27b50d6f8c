"""Cancel, the queue (fairness, queue_full, queue TTL), idempotency and
crash recovery of the supervisor."""
import concurrent.futures
import json
import os
import signal
import subprocess
import time

from conftest import (BASE_URL, STACK, Client, assert_envelope, frames, host_leftovers,
                      output, psql, py, run, sandboxctl, stack_script, submit, wait_for,
                      wait_no_leftovers, wait_phase, wait_run)


def _cancel_all(client, ids):
    for rid in ids:
        client.post(f"/runs/{rid}/cancel")
    for rid in ids:
        wait_run(client, rid, timeout=30)


def test_cancel_mid_run(admin):
    r = submit(admin, base_image="bash", command=["bash", "-c", "echo started; sleep 30"])
    rid = r.json()["run_id"]
    assert wait_phase(admin, rid, "running")
    wait_for(lambda: b"started" in output(frames(admin, rid)), timeout=10)
    t0 = time.monotonic()
    c = admin.post(f"/runs/{rid}/cancel")
    assert c.status_code == 202 and c.json()["cancelled"] is True
    final = wait_run(admin, rid, timeout=15)
    assert time.monotonic() - t0 < 3  # sleep dies on SIGTERM, no grace needed
    assert final["phase"] == "killed"
    assert final["reason_code"] == "canceled_by_user" and final["message"] == "canceled_by_user"
    fr = frames(admin, rid)
    ends = [f for f in fr if f["type"] == "event" and f["event"] == "end"]
    assert len(ends) == 1 and ends[0]["data"]["phase"] == "killed"
    # Cancelling a finished run is a polite no.
    again = admin.post(f"/runs/{rid}/cancel")
    assert again.status_code == 200 and again.json() == {
        "run_id": rid, "cancelled": False, "phase": "killed",
        "message": "the run had already finished"}


def test_cancel_escalates_to_sigkill_after_the_grace_period(admin):
    r = submit(admin, base_image="bash",
               command=["bash", "-c", "trap 'echo got TERM' TERM; while true; do sleep 0.1; done"])
    rid = r.json()["run_id"]
    assert wait_phase(admin, rid, "running")
    time.sleep(0.3)
    t0 = time.monotonic()
    admin.post(f"/runs/{rid}/cancel")
    final = wait_run(admin, rid, timeout=15)
    took = time.monotonic() - t0
    assert final["phase"] == "killed"
    assert 1.8 <= took < 6, took  # SANDBOX_CANCEL_GRACE_SECONDS = 2 in the test stack
    assert b"got TERM" in output(frames(admin, rid))


def test_queue_is_fair_full_and_cancellable(admin, user_key):
    """4 sleeping runs fill admin's per-user slots; the next ones queue;
    the queue holds 6; the 7th queued run is refused with 429."""
    # Start from an idle service: earlier tests' runs must not hold slots.
    assert wait_for(lambda: psql("SELECT count(*) FROM runs WHERE phase IN "
                                 "('queued','starting','running')") == [["0"]], timeout=60)
    ids = []
    try:
        for _ in range(4):
            ids.append(submit(admin, base_image="bash", command=["sleep", "30"]).json()["run_id"])
        for rid in ids:
            assert wait_phase(admin, rid, "running")
        queued = []
        for _ in range(6):
            r = submit(admin, base_image="bash", command=["true"])
            assert r.status_code == 202, r.text
            assert r.json()["phase"] == "queued" and r.json()["estimated_start_time"].endswith("Z")
            queued.append(r.json()["run_id"])
        ids += queued
        time.sleep(1)
        for rid in queued:
            assert admin.get(f"/runs/{rid}").json()["phase"] == "queued"
        full = submit(admin, base_image="bash", command=["true"])
        body = assert_envelope(full, 429, "queue_full")
        assert int(full.headers["Retry-After"]) >= 1
        assert body["error"]["details"]["queue_max_length"] == 6
        # Another user is not starved by admin's queue... but the queue is
        # shared, so alice is refused too while it is full.
        alice = Client(BASE_URL, user_key)
        assert_envelope(submit(alice, base_image="bash", command=["true"]), 429, "queue_full")
        # Cancelling a queued run ends it at once, without a sandbox.
        c = admin.post(f"/runs/{queued[0]}/cancel")
        assert c.status_code == 202 and c.json()["phase"] == "killed"
        q0 = wait_run(admin, queued[0])
        assert q0["phase"] == "killed" and q0["started_at"] is None
        assert wait_for(lambda: frames(admin, queued[0]) and
                        frames(admin, queued[0])[-1].get("event") == "end", timeout=10)
        # Now alice's run fits, and runs although admin's slots are full.
        ar = submit(alice, base_image="bash", command=["echo", "alice"])
        assert ar.status_code == 202
        final = wait_run(alice, ar.json()["run_id"], timeout=30)
        assert final["phase"] == "completed"
        assert all(admin.get(f"/runs/{rid}").json()["phase"] == "queued" for rid in queued[1:])
    finally:
        _cancel_all(admin, ids)
    # Freed slots drain the queue.
    assert wait_no_leftovers(20)


def test_idempotency_replay_conflict_and_concurrency(admin):
    key = "idem-" + str(time.time())
    body = py("print('once')")
    h = {"Idempotency-Key": key}
    first = submit(admin, headers=h, **body)
    assert first.status_code == 202
    again = submit(admin, headers=h, **body)
    assert again.status_code == 202 and again.json() == first.json()
    rid = first.json()["run_id"]
    # Key order and whitespace do not make a different body.
    spec = {"command": body["command"], "base_image": "python:3.11-slim", "spec_version": "1.0"}
    r = admin.post("/runs", data=json.dumps(spec, indent=3),
                   headers={"Content-Type": "application/json", **h})
    assert r.json()["run_id"] == rid
    conflict = submit(admin, headers=h, **py("print('twice')"))
    d = assert_envelope(conflict, 409, "idempotency_conflict")["error"]["details"]
    assert d["prior_id"] == rid and d["key"] == key and d["prior_created_at"].endswith("Z")
    # The same key is free on another endpoint scope and for another user.
    assert psql(f"SELECT count(*) FROM runs WHERE id = '{rid}'") == [["1"]]
    # Concurrent duplicates: one run, everyone gets it.
    key2 = "idem-conc-" + str(time.time())
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        res = list(ex.map(lambda _: submit(Client(BASE_URL, admin.s.headers["X-API-KEY"]),
                                           headers={"Idempotency-Key": key2},
                                           **py("print('conc')")), range(8)))
    assert {r.status_code for r in res} == {202}
    assert len({r.json()["run_id"] for r in res}) == 1
    assert psql(f"SELECT count(*) FROM idempotency WHERE key = '{key2}'") == [["1"]]
    assert_envelope(submit(admin, headers={"Idempotency-Key": "x" * 129}, **body),
                    400, "invalid_request")
    wait_run(admin, rid)


def test_supervisor_kill_9_recovery(admin):
    pidfile = os.path.join(STACK, "pids", "supervisor.pid")
    running = [submit(admin, base_image="bash", command=["sleep", "60"]).json()["run_id"]
               for _ in range(2)]
    for rid in running:
        assert wait_phase(admin, rid, "running")
    assert len(host_leftovers()["containers"]) >= 2
    os.kill(int(open(pidfile).read()), signal.SIGKILL)
    time.sleep(0.5)
    # Queued while nobody supervises.
    waiting = submit(admin, **py("print('after the crash')")).json()["run_id"]
    stack_script("up", STACK, BASE_URL.rsplit(":", 1)[1])
    for rid in running:
        final = wait_run(admin, rid, timeout=30)
        assert final["phase"] == "failed" and final["reason_code"] == "supervisor_restart", final
        fr = frames(admin, rid)
        assert sum(1 for f in fr if f["type"] == "event" and f["event"] == "end") == 1
        assert [f["seq"] for f in fr] == list(range(1, len(fr) + 1))
    final = wait_run(admin, waiting, timeout=30)
    assert final["phase"] == "completed" and output(frames(admin, waiting)) == b"after the crash\n"
    assert wait_no_leftovers(), host_leftovers()
    # Exactly one row per run: nothing lost, nothing duplicated.
    assert psql("SELECT count(*) FROM runs WHERE phase IN ('queued','starting','running')") == [["0"]]
