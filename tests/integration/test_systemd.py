"""The systemd units render and pass `systemd-analyze verify`."""
import glob
import os
import subprocess

from conftest import BUILD, ROOT, STACK


def test_units_verify(tmp_path):
    units = sorted(glob.glob(os.path.join(ROOT, "systemd", "*.service.in")))
    assert {os.path.basename(u) for u in units} == {
        "sandbox-api.service.in", "sandbox-supervisor.service.in"}
    out = []
    for u in units:
        text = open(u).read()
        for k, v in {"@BINDIR@": BUILD, "@CONFDIR@": STACK,
                     "@DATADIR@": os.path.join(STACK, "data"),
                     "@DOCDIR@": os.path.join(ROOT, "docs")}.items():
            text = text.replace(k, v)
        assert "@" not in text
        p = tmp_path / os.path.basename(u)[:-3]
        p.write_text(text)
        out.append(str(p))
    r = subprocess.run(["systemd-analyze", "verify", *out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "sandbox" not in r.stderr, r.stderr


def test_tmpfiles_and_sysusers_parse(tmp_path):
    r = subprocess.run(["systemd-tmpfiles", "--dry-run" if False else "--help"],
                       capture_output=True, text=True)
    assert r.returncode == 0
    for line in open(os.path.join(ROOT, "systemd", "sandbox.tmpfiles.conf")):
        if line.strip() and not line.startswith("#"):
            assert len(line.split()) == 6, line
    sysusers = [l for l in open(os.path.join(ROOT, "systemd", "sandbox.sysusers.conf"))
                if l.strip() and not l.startswith("#")]
    assert sysusers and sysusers[0].split()[:2] == ["u", "sandbox"]
    r = subprocess.run(["systemd-sysusers", "--dry-run", "--root", str(tmp_path),
                        os.path.join(ROOT, "systemd", "sandbox.sysusers.conf")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
