"""The `oci` runtime on runsc (gVisor) instead of crun
(SANDBOX_OCI_RUNTIME=runsc): the same probe and hostile programs, on a
stack of its own. gVisor is a kernel of its own, so a few answers differ
in form (named below); none differs in what the sandbox can do."""
import asyncio
import base64
import json
import os
import signal
import ssl
import subprocess
import time

import pytest
import websockets

from conftest import (new_session, output, private_stack, py, run, run_in, stack_script,
                      submit, wait_for, wait_phase, wait_run)
from test_isolation import HOSTILE, _check, probe
from test_streams import ECHO


CONF = ("SANDBOX_OCI_RUNTIME = runsc\nSANDBOX_WORKSPACE_CAP_MB = 64\n"
        "SANDBOX_CANCEL_GRACE_SECONDS = 2")


@pytest.fixture(scope="module")
def runsc_stack():
    with private_stack("sandbox-runsc.", CONF) as st:
        yield st


def containers(d):
    r = subprocess.run(["runsc", "--root", os.path.join(d, "data", "oci-state"), "list", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def gvisor_processes(d):
    """runsc's sandbox and gofer processes of this stack's containers."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].split(b"/")[-1].startswith(b"runsc") and d.encode() in b" ".join(cmd):
            found.append(int(p))
    return found


def test_runsc_is_what_runs(runsc_stack):
    _, c = runsc_stack
    rts = {r["name"]: r for r in c.get("/runtimes").json()["runtimes"]}
    assert rts["oci"]["available"], rts["oci"]
    assert rts["oci"]["runtime_version"].startswith("runsc")
    final, fr = run(c, **py("print('hello from gVisor')"))
    assert final["phase"] == "completed" and output(fr) == b"hello from gVisor\n"
    assert final["runtime_version"].startswith("runsc")
    # gVisor's kernel answers, not the host's.
    final, fr = run(c, base_image="bash", command=["uname", "-r"])
    assert final["phase"] == "completed"
    assert output(fr).strip() != os.uname().release.encode(), output(fr)


def test_runsc_probe(runsc_stack):
    _, c = runsc_stack
    a, b = probe(c), probe(c)
    for rep in (a, b):
        assert rep["uid"] != 0 and rep["gid"] != 0 and rep["groups"] in ([], [rep["gid"]])
        assert rep["CapEff"] == "0000000000000000" and rep["CapPrm"] == "0000000000000000"
        assert rep["CapBnd"] == "0000000000000000" and rep["ambient_caps"] == []
        # gVisor's /proc/self/status has no NoNewPrivs line: prctl answers.
        assert rep["nnp_prctl"] == 1
        # Our seccomp profile is loaded inside gVisor too (--oci-seccomp).
        assert rep["Seccomp"] == "2" and rep["seccomp_prctl"] == 2
        # gVisor checks permission before the read-only mount (EACCES where
        # Linux says EROFS); the root is mounted read-only all the same.
        assert rep["write_root"] in ("EROFS", "EACCES") and "ro" in rep["root_options"]
        assert rep["init_writable"] in ("EROFS", "EACCES")
        assert rep["write_workspace"] == "ok" and rep["write_tmp"] == "ok"
        assert rep["exec_workspace"] == "EACCES" and rep["exec_tmp"] == "EACCES"
        assert rep["interfaces"] == ["lo"] and max(rep["pids_visible"]) < 100
        assert rep["hostname"] == "sandbox"
    assert a["uid"] != b["uid"], "two runs got the same uid"


def test_runsc_status_channel_is_init_only(runsc_stack):
    """The FIFO sandbox-init reports through is visible inside, but the
    run's command can neither write a verdict into it nor read it."""
    _, c = runsc_stack
    code = ("import errno\nfor mode in ('w', 'r'):\n    try:\n"
            "        open('/.sandbox-status', mode); print('opened')\n"
            "    except OSError as e:\n        print(errno.errorcode[e.errno])\n"
            "raise SystemExit(3)")
    final, fr = run(c, **py(code))
    assert output(fr).split() == [b"EACCES", b"EACCES"], output(fr)
    assert final["phase"] == "failed" and final["exit_code"] == 3, final


@pytest.mark.parametrize("name", ["memory_bomb", "fork_bomb", "network", "syscalls",
                                  "sleep_past_timeout", "disk_fill", "open_files",
                                  "infinite_output"])
def test_runsc_hostile(runsc_stack, name):
    d, c = runsc_stack
    spec = HOSTILE[name]
    final, fr = run(c, timeout=90, **spec)
    if name == "network":
        # gVisor's stack with only lo says EHOSTUNREACH where Linux says
        # ENETUNREACH: no route either way, nothing was sent.
        words = output(fr).decode().split()
        assert words[:3] in (["ENETUNREACH"] * 3, ["EHOSTUNREACH"] * 3), words
        assert words[3] == "dns-failed" and len(words) == 6, words
        assert set(words[4:]) <= {"EPERM", "EACCES"}, words
    else:
        _check(name, final, fr)
    assert wait_for(lambda: containers(d) == [], timeout=15), containers(d)
    assert wait_for(lambda: gvisor_processes(d) == [], timeout=15), gvisor_processes(d)
    ok, okfr = run(c, **py("print('still fine')"))
    assert ok["phase"] == "completed" and output(okfr) == b"still fine\n"


def test_runsc_cancel_is_gentle_first(runsc_stack):
    """Cancel sends TERM to the sandbox's own init (runsc kill), which
    forwards it: a command that traps TERM gets to say so, then the run
    ends killed/canceled_by_user."""
    d, c = runsc_stack
    rid = submit(c, base_image="bash",
                 command=["bash", "-c", "trap 'echo got TERM; exit 0' TERM; "
                          "echo ready; while :; do sleep 0.1; done"]).json()["run_id"]
    assert wait_phase(c, rid, "running")
    assert wait_for(lambda: b"ready" in output(c.get(f"/runs/{rid}/logs").json()), timeout=10)
    c.post(f"/runs/{rid}/cancel")
    final = wait_run(c, rid, timeout=15)
    assert final["phase"] == "killed" and final["reason_code"] == "canceled_by_user"
    assert b"got TERM" in output(c.get(f"/runs/{rid}/logs").json())
    assert wait_for(lambda: containers(d) == [], timeout=15), containers(d)


def test_runsc_session_workspace(runsc_stack):
    """A session's workspace outlives its runs on gVisor too, and the
    files API sees what a run wrote."""
    _, c = runsc_stack
    sid = new_session(c)["session_id"]
    try:
        final, _ = run_in(c, sid, ["python3", "-c", "open('/workspace/kept', 'w').write('42')"])
        assert final["phase"] == "completed", final
        final, fr = run_in(c, sid, ["cat", "/workspace/kept"])
        assert final["phase"] == "completed" and output(fr) == b"42"
        items = c.get(f"/sessions/{sid}/files").json()["items"]
        assert [(i["path"], i["size"]) for i in items] == [("kept", 2)], items
    finally:
        c.delete(f"/sessions/{sid}")


def test_runsc_files_inline(runsc_stack):
    _, c = runsc_stack
    final, fr = run(c, base_image="bash", command=["cat", "in.txt"],
                    files=[{"path": "in.txt", "content_b64": base64.b64encode(b"inline").decode()}])
    assert final["phase"] == "completed" and output(fr) == b"inline"


def test_runsc_supervisor_kill_9(runsc_stack):
    """kill -9 of the supervisor with a gVisor sandbox running: the
    restarted supervisor ends the run and removes the sandbox, its gofer
    and its state; the next run works."""
    d, c = runsc_stack
    rid = submit(c, base_image="bash", command=["sleep", "60"]).json()["run_id"]
    assert wait_phase(c, rid, "running")
    assert containers(d) == [f"sbx-{rid}"] and gvisor_processes(d)
    os.kill(int(open(os.path.join(d, "pids", "supervisor.pid")).read()), signal.SIGKILL)
    time.sleep(0.5)
    port = c.base.rsplit(":", 1)[1].split("/")[0]
    stack_script("up", d, port, extra_conf=CONF)
    final = wait_run(c, rid, timeout=30)
    assert final["phase"] == "failed" and final["reason_code"] == "supervisor_restart", final
    assert wait_for(lambda: containers(d) == [], timeout=20), containers(d)
    assert wait_for(lambda: gvisor_processes(d) == [], timeout=20), gvisor_processes(d)
    ok, fr = run(c, **py("print('after the crash')"))
    assert ok["phase"] == "completed" and output(fr) == b"after the crash\n"


def test_runsc_interactive_stdin(runsc_stack):
    """stdin frames reach a gVisor sandbox's command (runsc passes the
    stdin pipe through) and its answers stream back."""
    d, c = runsc_stack
    r = submit(c, spec_version="1.1", interactive=True, base_image="python", command=ECHO)
    assert r.status_code == 202, r.text
    ctx = ssl.create_default_context(cafile=os.path.join(d, "tls", "ca.pem"))

    async def talk():
        got = []
        async with websockets.connect(r.json()["log_stream_url"], ssl=ctx,
                                      max_size=2 ** 20) as ws:
            async def reader():
                async for m in ws:
                    got.append(json.loads(m))
            rt = asyncio.create_task(reader())
            await ws.send(json.dumps({"type": "stdin", "encoding": "utf8", "data": "gvisor\n"}))
            await ws.send(json.dumps({"type": "stdin_close"}))
            await asyncio.wait_for(rt, 30)
        return got

    fr = asyncio.run(talk())
    assert output(fr) == b"GVISOR\neof\n", fr
    assert fr[-1]["event"] == "end" and fr[-1]["data"]["exit_code"] == 0
