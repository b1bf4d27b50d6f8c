"""Artifacts: capture by glob after the run, served by nginx with Range,
paths refused before anything is read, caps per run and per user, expiry
by the reaper."""
import json
import os
import subprocess
import uuid

from conftest import (BASE_URL, STACK, BUILD, Client, assert_envelope, psql, run,
                      server_env, wait_for)

MAKE = ("mkdir -p dist/sub build; printf 0123456789 > dist/a.txt;"
        "printf '{\"ok\": true}' > result.json; echo x > dist/sub/b.log;"
        "echo no > build/skip.txt; echo no > notes.txt; echo no > build/x.json;"
        "ln -s /etc/passwd dist/passwd; ln -s /etc dist/etcdir")


def artifact_run(client, patterns=("dist/**", "*.json"), cmd=MAKE):
    final, _ = run(client, base_image="bash", command=["bash", "-c", cmd],
                   capture_patterns=list(patterns))
    assert final["phase"] == "completed", final
    return final


def test_glob_capture_and_listing(admin):
    final = artifact_run(admin)
    rid = final["id"]
    r = admin.get(f"/runs/{rid}/artifacts")
    assert r.status_code == 200, r.text
    items = {i["path"]: i for i in r.json()["items"]}
    assert set(items) == {"dist/a.txt", "dist/sub/b.log", "result.json", "dist/passwd",
                          "dist/etcdir"}
    assert items["dist/a.txt"]["size"] == 10
    assert items["dist/a.txt"]["content_type"] == "text/plain"
    assert items["result.json"]["content_type"] == "application/json"
    assert items["dist/a.txt"]["download_url"] == f"/api/v1/sandbox/runs/{rid}/artifacts/dist/a.txt"
    # Symlinks: metadata only, never dereferenced.
    assert items["dist/passwd"] == {"path": "dist/passwd", "type": "symlink", "size": 0,
                                    "target": "/etc/passwd", "content_type": None,
                                    "download_url": None}
    assert not any(p.startswith("dist/etcdir/") for p in items)
    assert final["resource_usage"]["artifact_bytes"] == 10 + 12 + 2
    on_disk = os.path.join(STACK, "data", "runs", rid, "artifacts")
    assert not os.path.lexists(os.path.join(on_disk, "dist", "passwd"))
    r = admin.get(f"/runs/{rid}/artifacts/dist/passwd")
    assert r.status_code == 400 and b"root:" not in r.content
    # The admin view lists them too.
    detail = admin.get(f"/admin/runs/{rid}").json()
    assert detail["resource_usage"]["artifact_bytes"] == 24
    assert {a["path"] for a in detail["artifacts"]} == set(items)
    assert [a for a in detail["artifacts"] if a["path"] == "dist/a.txt"][0]["size"] == 10


def test_download_and_ranges(admin):
    rid = artifact_run(admin)["id"]
    url = f"/runs/{rid}/artifacts/dist/a.txt"
    full = admin.get(url)
    assert full.status_code == 200 and full.content == b"0123456789"
    assert full.headers["Accept-Ranges"] == "bytes"
    assert full.headers["Content-Type"] == "text/plain"
    assert "sandbox" in full.headers["Content-Security-Policy"]
    r = admin.get(url, headers={"Range": "bytes=0-4"})
    assert r.status_code == 206 and r.content == b"01234"
    assert r.headers["Content-Range"] == "bytes 0-4/10"
    r = admin.get(url, headers={"Range": "bytes=-3"})
    assert r.status_code == 206 and r.content == b"789"
    assert r.headers["Content-Range"] == "bytes 7-9/10"
    r = admin.get(url, headers={"Range": "bytes=0-1,5-6"})
    assert r.status_code == 206
    assert r.headers["Content-Type"].startswith("multipart/byteranges; boundary=")
    assert b"Content-Range: bytes 0-1/10" in r.content and b"\r\n01\r\n" in r.content
    assert b"Content-Range: bytes 5-6/10" in r.content and b"\r\n56\r\n" in r.content
    for bad in ("bytes=7-5", "bytes=20-30"):
        r = admin.get(url, headers={"Range": bad})
        assert_envelope(r, 416, "range_not_satisfiable")
        assert r.headers["Content-Range"] == "bytes */10"
    # More than 16 ranges: the whole file (stated limit).
    many = ",".join(f"{i}-{i}" for i in range(10)) + "," + ",".join("0-0" for _ in range(10))
    r = admin.get(url, headers={"Range": "bytes=" + many})
    assert r.status_code == 200 and r.content == b"0123456789"


def test_traversal_forms_are_400(admin):
    rid = artifact_run(admin)["id"]
    for p in ("../x", "a/../../x", "%2e%2e/x", "%2E%2E%2Fx", "%252e%252e/x", "..%5cx",
              "..\\x", "/etc/passwd", "//etc/passwd", "dist/../../../../etc/passwd",
              "../../../../../../etc/passwd", "dist/%2e%2e/%2e%2e/x"):
        status, headers, body = admin.raw("GET", f"/runs/{rid}/artifacts/{p}")
        assert status == 400, (p, status, body[:200])
        assert json.loads(body)["error"]["code"] == "invalid_request", (p, body)
        assert b"root:" not in body


def test_other_users_artifacts_are_404(admin, user_key):
    rid = artifact_run(admin)["id"]
    alice = Client(BASE_URL, user_key)
    assert_envelope(alice.get(f"/runs/{rid}/artifacts"), 404, "not_found")
    assert_envelope(alice.get(f"/runs/{rid}/artifacts/dist/a.txt"), 404, "not_found")
    assert_envelope(admin.get(f"/runs/{rid}/artifacts/nope.txt"), 404, "not_found")


def new_user_client():
    name = "art-" + uuid.uuid4().hex[:8]
    key = subprocess.run([os.path.join(BUILD, "sandboxctl"), "key", "create", "--user", name],
                         env=server_env(), capture_output=True, text=True,
                         check=True).stdout.strip()
    return Client(BASE_URL, key)


def test_per_run_and_per_user_caps(admin):
    c = new_user_client()
    # Per run: 4 MB here. Three 1.5 MB files: two fit.
    cmd = "mkdir out; for i in 1 2 3; do head -c 1572864 /dev/zero > out/f$i; done"
    final = artifact_run(c, ["out/**"], cmd)
    items = c.get(f"/runs/{final['id']}/artifacts").json()
    assert len(items["items"]) == 2 and items["truncated"] is True
    assert final["resource_usage"]["artifact_bytes"] == 2 * 1572864
    assert final["resource_usage"]["artifacts_truncated"] is True
    # Per user: 8 MB here; 3 MB used, so a 3 MB run still fits, then 2 MB
    # are left: one of two 1.5 MB files.
    cmd2 = "mkdir out; for i in 1 2; do head -c 1572864 /dev/zero > out/f$i; done"
    second = artifact_run(c, ["out/**"], cmd2)
    assert second["resource_usage"]["artifact_bytes"] == 2 * 1572864
    third = artifact_run(c, ["out/**"], cmd2)
    assert third["resource_usage"]["artifact_bytes"] == 1572864
    assert c.get(f"/runs/{third['id']}/artifacts").json()["truncated"] is True


def test_reaper_expires_artifacts(admin):
    rid = artifact_run(admin)["id"]
    d = os.path.join(STACK, "data", "runs", rid, "artifacts")
    assert os.path.isdir(d)
    psql(f"UPDATE runs SET finished_at = now() - interval '25 hours' WHERE id = '{rid}'")
    assert wait_for(lambda: not os.path.exists(d), timeout=20)
    body = admin.get(f"/runs/{rid}/artifacts").json()
    assert body["expired"] is True and body["items"] == []
    r = admin.get(f"/runs/{rid}/artifacts/dist/a.txt")
    body = assert_envelope(r, 404, "not_found")
    assert body["error"]["details"]["expired"] is True


def test_reaper_prunes_idempotency_and_orphans_within_the_data_root(admin, tmp_path):
    old = str(uuid.uuid4())
    psql("INSERT INTO idempotency (endpoint, user_id, key, fingerprint, object_id, created_at)"
         f" VALUES ('runs', 'admin', 'reaper-old', 'x', '{old}', now() - interval '2 days')")
    runs = os.path.join(STACK, "data", "runs")
    orphan = os.path.join(runs, str(uuid.uuid4()))
    os.makedirs(os.path.join(orphan, "artifacts"))
    # A symlink named like a run pointing outside: never followed.
    outside = tmp_path / "keep"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    link = os.path.join(runs, str(uuid.uuid4()))
    os.symlink(str(outside), link)
    assert wait_for(lambda: not os.path.exists(orphan), timeout=20)
    assert wait_for(lambda: psql("SELECT count(*) FROM idempotency WHERE key = 'reaper-old'")
                    == [["0"]], timeout=20)
    assert (outside / "precious").read_text() == "keep me"
    os.unlink(link)


def test_reaper_removes_orphaned_mounts_and_cgroups():
    """What a failure could leave behind with no run to account for it."""
    rid = str(uuid.uuid4())
    ws = os.path.join(STACK, "data", "runs", rid, "workspace")
    os.makedirs(ws)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "orphan", ws], check=True)
    cg = f"/sys/fs/cgroup/pids/sandbox/sbx-{rid}"
    os.makedirs(cg)

    def gone():
        mounted = any(l.split()[4] == ws for l in open("/proc/self/mountinfo"))
        return not mounted and not os.path.exists(cg) and not os.path.exists(os.path.dirname(ws))
    assert wait_for(gone, timeout=20)
