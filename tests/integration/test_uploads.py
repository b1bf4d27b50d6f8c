"""Uploads into a session's workspace: tar (plain, gzip, bzip2, xz), zip and
multipart, all or nothing, with every unsafe entry refused and every limit
hit."""
import io
import json
import os
import tarfile
import time
import zipfile

import pytest

from conftest import (run_in, BASE_URL, STACK, Client, assert_envelope, new_session, output,
                      session_dir, wait_run)

CT = {"tar": "application/x-tar", "gz": "application/gzip", "bz2": "application/x-bzip2",
      "xz": "application/x-xz", "zip": "application/zip"}


def tar_bytes(entries, mode="w"):
    """entries: (TarInfo-ish dict, data or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.GNU_FORMAT) as t:
        for spec, data in entries:
            ti = tarfile.TarInfo(spec["name"])
            ti.type = spec.get("type", tarfile.REGTYPE)
            ti.mode = spec.get("mode", 0o644)
            ti.linkname = spec.get("linkname", "")
            ti.devmajor, ti.devminor = spec.get("dev", (0, 0))
            ti.size = len(data) if data is not None and ti.type == tarfile.REGTYPE else 0
            t.addfile(ti, io.BytesIO(data) if data else None)
    return buf.getvalue()


def zip_bytes(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            zi = zipfile.ZipInfo(name)
            zi.create_system = 3
            zi.external_attr = mode << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return buf.getvalue()


def upload(client, sid, data, kind):
    return client.post(f"/sessions/{sid}/files", data=data, headers={"Content-Type": CT[kind]})


def listing(client, sid):
    r = client.get(f"/sessions/{sid}/files")
    assert r.status_code == 200, r.text
    return [(i["path"], i["type"], i["size"]) for i in r.json()["items"]]


def staging_empty(sid):
    d = os.path.join(session_dir(sid), ".staging")
    return not os.path.isdir(d) or os.listdir(d) == []


@pytest.mark.parametrize("kind", ["tar", "gz", "bz2", "xz"])
def test_tar_upload_is_seen_by_the_next_run(admin, session, kind):
    sid = session["session_id"]
    mode = {"tar": "w", "gz": "w:gz", "bz2": "w:bz2", "xz": "w:xz"}[kind]
    data = tar_bytes([({"name": "./pkg/", "type": tarfile.DIRTYPE, "mode": 0o755}, None),
                      ({"name": "./pkg/mod.py", "mode": 0o644}, b"VALUE = 42\n"),
                      ({"name": "main.py", "mode": 0o755},
                       b"from pkg.mod import VALUE\nprint(VALUE)\n")], mode)
    r = upload(admin, sid, data, kind)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body == {"session_id": sid, "bytes_received": len(data), "file_count": 2,
                    "bytes_written": 50, "kind": "tar"}
    final, fr = run_in(admin, sid, ["python3", "main.py"])
    assert final["phase"] == "completed" and output(fr) == b"42\n", (final, fr)
    assert staging_empty(sid)


def test_zip_and_multipart_uploads(admin, session):
    sid = session["session_id"]
    z = zip_bytes([("lib/util.py", "def f():\n    return 'zip'\n", 0o100644)])
    r = upload(admin, sid, z, "zip")
    assert r.status_code == 201 and r.json()["file_count"] == 1, r.text
    r = admin.post(f"/sessions/{sid}/files",
                   files=[("files", ("run.py", b"from lib.util import f\nprint(f())\n")),
                          ("files", ("data/in.txt", b"multipart\n"))])
    assert r.status_code == 201, r.text
    assert r.json()["file_count"] == 2 and r.json()["kind"] == "multipart"
    final, fr = run_in(admin, sid, ["sh", "-c", "python3 run.py; cat data/in.txt"])
    assert output(fr) == b"zip\nmultipart\n", fr
    # An upload replaces files of the same name.
    r = admin.post(f"/sessions/{sid}/files", files=[("files", ("data/in.txt", b"v2\n"))])
    assert r.status_code == 201, r.text
    final, fr = run_in(admin, sid, ["cat", "data/in.txt"])
    assert output(fr) == b"v2\n"


UNSAFE_TAR = {
    "dotdot": [({"name": "../x"}, b"x")],
    "dotdot_inner": [({"name": "a/../../x"}, b"x")],
    "absolute": [({"name": "/etc/sandbox-test-x"}, b"x")],
    "double_slash": [({"name": "//sandbox-test-x"}, b"x")],
    "backslash": [({"name": "..\\x"}, b"x")],
    "zip_slip_40": [({"name": "../" * 40 + "tmp/sandbox-test-slip"}, b"x")],
    "symlink_then_file": [({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/tmp"}, None),
                          ({"name": "link/sandbox-test-through"}, b"x")],
    "dir_symlink_then_file": [({"name": "d", "type": tarfile.SYMTYPE, "linkname": "../../.."},
                               None),
                              ({"name": "d/sandbox-test-under"}, b"x")],
    "hardlink_outside": [({"name": "passwd", "type": tarfile.LNKTYPE,
                           "linkname": "/etc/passwd"}, None)],
    "device": [({"name": "null", "type": tarfile.CHRTYPE, "dev": (1, 3)}, None)],
    "fifo": [({"name": "pipe", "type": tarfile.FIFOTYPE}, None)],
    "setuid": [({"name": "suid", "mode": 0o4755}, b"#!/bin/sh\n")],
    "too_deep": [({"name": "/".join("d" * 1 for _ in range(12)) + "/f"}, b"x")],
}

OUTSIDE = ["/tmp/sandbox-test-slip", "/tmp/sandbox-test-through", "/etc/sandbox-test-x",
           "/sandbox-test-x", "/sandbox-test-under"]


@pytest.mark.parametrize("case", sorted(UNSAFE_TAR))
def test_unsafe_tar_entries_write_nothing(admin, session, case):
    sid = session["session_id"]
    good = ({"name": "good.txt"}, b"fine")
    data = tar_bytes([good] + UNSAFE_TAR[case])
    r = upload(admin, sid, data, "tar")
    body = assert_envelope(r, 400, "unsafe_entries")
    rejected = body["error"]["details"]["rejected"]
    assert rejected and all({"entry", "reason"} <= set(e) for e in rejected)
    assert any(e["entry"] == UNSAFE_TAR[case][0][0]["name"] for e in rejected), rejected
    # All or nothing: not even the good entry; nothing outside.
    assert listing(admin, sid) == []
    for p in OUTSIDE + [os.path.join(session_dir(sid), "x"), os.path.join(STACK, "x")]:
        assert not os.path.lexists(p), p
    assert staging_empty(sid)


def test_unsafe_zip_entries(admin, session):
    sid = session["session_id"]
    z = zip_bytes([("ok.txt", "ok", 0o100644),
                   ("../" * 40 + "tmp/sandbox-test-slip", "x", 0o100644),
                   ("..\\evil", "x", 0o100644),
                   ("ln", "/etc/passwd", 0o120777)])
    body = assert_envelope(upload(admin, sid, z, "zip"), 400, "unsafe_entries")
    reasons = {e["entry"]: e["reason"] for e in body["error"]["details"]["rejected"]}
    assert reasons["../" * 40 + "tmp/sandbox-test-slip"].startswith("path traversal")
    # libarchive turns a zip name's backslashes into slashes: "../evil".
    assert reasons.get("..\\evil", reasons.get("../evil")) in ("backslash in path",
                                                              "path traversal (..)")
    assert reasons["ln"] == "symlink"
    assert listing(admin, sid) == [] and not os.path.exists("/tmp/sandbox-test-slip")


def test_multipart_unsafe_names(admin, session):
    sid = session["session_id"]
    r = admin.post(f"/sessions/{sid}/files",
                   files=[("files", ("ok.py", b"1")), ("files", ("../../escape.py", b"2"))])
    body = assert_envelope(r, 400, "unsafe_entries")
    assert body["error"]["details"]["rejected"][0]["entry"] == "../../escape.py"
    assert listing(admin, sid) == []


def test_zip_bomb_is_refused_quickly(admin, session):
    sid = session["session_id"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("bomb.bin", "w") as f:
            chunk = b"\0" * (1 << 20)
            for _ in range(200):
                f.write(chunk)
    data = buf.getvalue()
    assert len(data) < 1 << 20
    t0 = time.monotonic()
    body = assert_envelope(upload(admin, sid, data, "zip"), 413, "upload_too_large")
    assert time.monotonic() - t0 < 5
    assert body["error"]["details"]["reason"] == "expansion_ratio"
    assert listing(admin, sid) == [] and staging_empty(sid)


def test_many_tiny_entries_are_refused_quickly(admin, session):
    sid = session["session_id"]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for i in range(100_000):
            ti = tarfile.TarInfo(f"f{i}")
            ti.size = 0
            t.addfile(ti)
    t0 = time.monotonic()
    body = assert_envelope(upload(admin, sid, buf.getvalue(), "gz"), 413, "upload_too_large")
    assert time.monotonic() - t0 < 5
    assert body["error"]["details"] == {"reason": "file_count", "limit": 1000}
    assert listing(admin, sid) == [] and staging_empty(sid)


def test_upload_past_max_upload_mb(admin, session):
    sid = session["session_id"]
    data = b"\0" * (49 * 1024 * 1024)
    r = admin.post(f"/sessions/{sid}/files", data=data,
                   headers={"Content-Type": "application/x-tar"})
    body = assert_envelope(r, 413, "upload_too_large")
    assert body["error"]["details"]["max_upload_mb"] == 48


def test_upload_past_the_workspace_cap(admin, session):
    sid = session["session_id"]
    big = os.urandom(40 * 1024 * 1024)
    r = admin.post(f"/sessions/{sid}/files", files=[("files", ("a.bin", big))])
    assert r.status_code == 201, r.text
    r = admin.post(f"/sessions/{sid}/files", files=[("files", ("b.bin", big))])
    body = assert_envelope(r, 507, "workspace_full")
    d = body["error"]["details"]
    assert d["max_workspace_mb"] == 64 and 39 < d["current_workspace_mb"] < 42, d
    assert [p for p, _, _ in listing(admin, sid)] == ["a.bin"]
    assert staging_empty(sid)


def test_unsupported_type_busy_session_and_foreign_session(admin, session, user_key):
    sid = session["session_id"]
    r = admin.post(f"/sessions/{sid}/files", data=b"x", headers={"Content-Type": "text/plain"})
    body = assert_envelope(r, 415, "unsupported_media_type")
    assert "application/zip" in body["error"]["details"]["supported"]
    rid = admin.post("/runs", data=json.dumps({"spec_version": "1.0", "session_id": sid,
                                               "command": ["sleep", "30"]}),
                     headers={"Content-Type": "application/json"}).json()["run_id"]
    from conftest import wait_phase
    wait_phase(admin, rid, "running")
    r = admin.post(f"/sessions/{sid}/files", files=[("files", ("x.txt", b"x"))])
    body = assert_envelope(r, 409, "session_busy")
    assert body["error"]["details"]["run_id"] == rid
    admin.post(f"/runs/{rid}/cancel")
    wait_run(admin, rid)
    alice = Client(BASE_URL, user_key)
    r = alice.post(f"/sessions/{sid}/files", files=[("files", ("x.txt", b"x"))])
    assert_envelope(r, 404, "not_found")
    assert listing(admin, sid) == []
