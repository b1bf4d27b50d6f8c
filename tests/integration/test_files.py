"""The workspace files API: list, download (through nginx, Range), write one
file, delete; paths confined, symlinks listed and never followed."""
import json
import os

from conftest import run_in, BASE_URL, Client, assert_envelope, output, wait_run


def test_put_list_get_delete(admin, session):
    sid = session["session_id"]
    r = admin.put(f"/sessions/{sid}/files/src/app.py", data=b"print('put')\n")
    assert r.status_code == 201, r.text
    assert r.json() == {"session_id": sid, "path": "src/app.py", "size": 13,
                        "bytes_received": 13}
    final, fr = run_in(admin, sid, ["python3", "src/app.py"])
    assert output(fr) == b"put\n"
    items = admin.get(f"/sessions/{sid}/files").json()["items"]
    assert [(i["path"], i["type"], i["size"]) for i in items] == [
        ("src", "dir", 0), ("src/app.py", "file", 13)]
    assert all(i["mtime"].endswith("Z") for i in items)
    g = admin.get(f"/sessions/{sid}/files/src/app.py")
    assert g.status_code == 200 and g.content == b"print('put')\n"
    assert g.headers["Content-Type"].startswith("text/")
    assert "attachment" in g.headers["Content-Disposition"]
    part = admin.get(f"/sessions/{sid}/files/src/app.py", headers={"Range": "bytes=0-4"})
    assert part.status_code == 206 and part.content == b"print"
    assert part.headers["Content-Range"] == "bytes 0-4/13"
    d = admin.delete(f"/sessions/{sid}/files/src")
    assert d.status_code == 200 and d.json()["type"] == "dir", d.text
    assert admin.get(f"/sessions/{sid}/files").json()["items"] == []
    assert_envelope(admin.get(f"/sessions/{sid}/files/src/app.py"), 404, "not_found")
    assert_envelope(admin.delete(f"/sessions/{sid}/files/src"), 404, "not_found")


def test_files_written_by_a_run_are_listed_and_served(admin, session):
    sid = session["session_id"]
    run_in(admin, sid, ["sh", "-c", "mkdir -p out/deep; echo result > out/deep/r.txt;"
                        "ln -s /etc/passwd out/pw; ln -s /etc out/etc; mkfifo out/fifo"])
    r = admin.get(f"/sessions/{sid}/files")
    items = {i["path"]: i for i in r.json()["items"]}
    assert items["out/deep/r.txt"]["type"] == "file"
    assert items["out/pw"]["type"] == "symlink" and items["out/pw"]["size"] == 0
    assert items["out/etc"]["type"] == "symlink"
    assert not any(p.startswith("out/etc/") for p in items), "a symlink was followed"
    assert items["out/fifo"]["type"] == "other"
    assert admin.get(f"/sessions/{sid}/files/out/deep/r.txt").content == b"result\n"
    for p in ("out/pw", "out/etc/passwd", "out/etc/hostname"):
        r = admin.get(f"/sessions/{sid}/files/{p}")
        assert r.status_code in (400, 404), (p, r.status_code, r.text)
        assert b"root:" not in r.content
    assert_envelope(admin.get(f"/sessions/{sid}/files/out/fifo"), 400, "invalid_request")
    # Writing through a planted symlink is refused; nothing lands outside.
    r = admin.put(f"/sessions/{sid}/files/out/etc/sandbox-test", data=b"x")
    assert r.status_code in (400, 409), r.text
    assert not os.path.exists("/etc/sandbox-test")
    # A subtree, bounded.
    sub = admin.get(f"/sessions/{sid}/files?path=out&depth=0").json()
    assert [i["path"] for i in sub["items"]] == ["out/deep", "out/etc", "out/fifo", "out/pw"]
    assert sub["truncated"] is True
    lim = admin.get(f"/sessions/{sid}/files?limit=2").json()
    assert lim["count"] == 2 and lim["truncated"] is True


def test_traversal_and_foreign_sessions(admin, session, user_key):
    sid = session["session_id"]
    admin.put(f"/sessions/{sid}/files/a.txt", data=b"a")
    for p in ("../x", "a/../../x", "%2e%2e/x", "%252e%252e/x", "..%5cx", "/etc/passwd",
              "//x", "../../../../../../etc/passwd"):
        status, headers, body = admin.raw("GET", f"/sessions/{sid}/files/{p}")
        assert status == 400, (p, status, body)
        assert json.loads(body)["error"]["code"] == "invalid_request"
        status, _, _ = admin.raw("PUT", f"/sessions/{sid}/files/{p}", body=b"x")
        assert status == 400, p
    assert_envelope(admin.get(f"/sessions/{sid}/files?path=../.."), 400, "invalid_request")
    alice = Client(BASE_URL, user_key)
    assert_envelope(alice.get(f"/sessions/{sid}/files"), 404, "not_found")
    assert_envelope(alice.get(f"/sessions/{sid}/files/a.txt"), 404, "not_found")
    assert_envelope(alice.put(f"/sessions/{sid}/files/b.txt", data=b"b"), 404, "not_found")
    assert_envelope(alice.delete(f"/sessions/{sid}/files/a.txt"), 404, "not_found")
    assert [i["path"] for i in admin.get(f"/sessions/{sid}/files").json()["items"]] == ["a.txt"]


def test_put_past_the_cap_leaves_nothing(admin, session):
    sid = session["session_id"]
    r = admin.put(f"/sessions/{sid}/files/big.bin", data=b"\0" * (40 * 1024 * 1024))
    assert r.status_code == 201, r.text
    r = admin.put(f"/sessions/{sid}/files/big2.bin", data=b"\0" * (40 * 1024 * 1024))
    body = assert_envelope(r, 507, "workspace_full")
    assert body["error"]["details"]["max_workspace_mb"] == 64
    assert [i["path"] for i in admin.get(f"/sessions/{sid}/files").json()["items"]] == [
        "big.bin"]
