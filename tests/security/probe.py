"""Runs inside a sandbox and reports, as one JSON object on stdout, what
it can see and do. The integration suite asserts on the report."""
import ctypes
import errno
import json
import os
import socket
import stat

libc = ctypes.CDLL(None, use_errno=True)
report = {}


def status_field(name):
    for line in open("/proc/self/status"):
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


report["uid"] = os.getuid()
report["gid"] = os.getgid()
report["euid"] = os.geteuid()
report["groups"] = os.getgroups()
report["CapEff"] = status_field("CapEff")
report["CapPrm"] = status_field("CapPrm")
report["CapBnd"] = status_field("CapBnd")
report["CapAmb"] = status_field("CapAmb")
report["NoNewPrivs"] = status_field("NoNewPrivs")
report["Seccomp"] = status_field("Seccomp")
# The same facts from the kernel's own answers (prctl), for kernels whose
# /proc/self/status leaves some lines out (gVisor has no NoNewPrivs or
# CapAmb line).
report["nnp_prctl"] = libc.prctl(39, 0, 0, 0, 0)          # PR_GET_NO_NEW_PRIVS
report["seccomp_prctl"] = libc.prctl(21, 0, 0, 0, 0)      # PR_GET_SECCOMP
report["ambient_caps"] = [c for c in range(41)            # PR_CAP_AMBIENT_IS_SET
                          if libc.prctl(47, 1, c, 0, 0) == 1]


def try_write(path):
    try:
        with open(path, "w") as f:
            f.write("x")
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


report["write_root"] = try_write("/probe-root-write")
report["write_usr"] = try_write("/usr/bin/probe")
report["write_workspace"] = try_write("/workspace/probe.txt")
report["write_tmp"] = try_write("/tmp/probe.txt")


def try_exec(d):
    p = os.path.join(d, "probe-exec.sh")
    with open(p, "w") as f:
        f.write("#!/bin/sh\necho ran\n")
    os.chmod(p, 0o755)
    try:
        os.execv(p, [p]) if os.fork() == 0 else None
    except OSError as e:
        os._exit(e.errno)
    _, st = os.wait()
    code = os.waitstatus_to_exitcode(st)
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


report["exec_workspace"] = try_exec("/workspace")
report["exec_tmp"] = try_exec("/tmp")
report["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
report["pids_visible"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report["hostname"] = socket.gethostname()
report["mounts"] = [l.split()[1] for l in open("/proc/self/mounts")]
report["root_options"] = [l.split()[3].split(",") for l in open("/proc/self/mounts")
                          if l.split()[1] == "/"][-1]
st = os.stat("/.sandbox-init")
report["init_writable"] = try_write("/.sandbox-init")
report["ws_mode"] = oct(stat.S_IMODE(os.stat("/workspace").st_mode))
print(json.dumps(report))
