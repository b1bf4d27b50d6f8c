"""The admin API (PRD §30): every user's runs with filters and paging,
one run in full; admin role only."""
import time

from conftest import BASE_URL, Client, assert_envelope, py, run, submit, wait_run


def test_non_admins_are_forbidden(user_key):
    alice = Client(BASE_URL, user_key)
    assert_envelope(alice.get("/admin/runs"), 403, "forbidden")
    assert_envelope(alice.get("/admin/runs/00000000-0000-4000-8000-000000000000"), 403, "forbidden")


def test_admin_lists_every_users_runs_with_filters(admin, user_key):
    alice = Client(BASE_URL, user_key)
    mine, _ = run(admin, **py("print(1)"))
    hers, _ = run(alice, base_image="bash", command=["false"])
    body = admin.get("/admin/runs?limit=200").json()
    assert {"items", "total", "limit", "offset", "has_more"} == set(body)
    ids = {i["id"] for i in body["items"]}
    assert mine["id"] in ids and hers["id"] in ids
    item = [i for i in body["items"] if i["id"] == hers["id"]][0]
    for k in ("id", "user_id", "spec_version", "runtime", "runtime_version", "base_image",
              "phase", "exit_code", "started_at", "finished_at", "image_digest", "policy_hash"):
        assert k in item, k
    assert item["user_id"] == "alice" and item["phase"] == "failed"
    f = admin.get("/admin/runs?user_id=alice&phase=failed").json()
    assert f["items"] and all(i["user_id"] == "alice" and i["phase"] == "failed" for i in f["items"])
    f = admin.get("/admin/runs?base_image=bash&runtime=oci&q=bas").json()
    assert hers["id"] in {i["id"] for i in f["items"]}
    assert all(i["base_image"] == "bash" for i in f["items"])
    f = admin.get(f"/admin/runs?image_digest={mine['image_digest']}").json()
    assert mine["id"] in {i["id"] for i in f["items"]}
    f = admin.get(f"/admin/runs?started_at_from={mine['started_at']}&finished_at_to=2999-01-01T00:00:00Z").json()
    assert mine["id"] in {i["id"] for i in f["items"]}
    f = admin.get("/admin/runs?finished_at_from=2999-01-01T00:00:00Z").json()
    assert f["items"] == [] and f["total"] == 0
    # Paging and sorting (at least five runs exist by now).
    for _ in range(3):
        run(admin, **py("pass"))
    p1 = admin.get("/admin/runs?limit=2&offset=0&sort=finished_at:desc").json()
    p2 = admin.get("/admin/runs?limit=2&offset=2&sort=finished_at:desc").json()
    assert p1["limit"] == 2 and len(p1["items"]) == 2 and p1["has_more"] is True
    assert not {i["id"] for i in p1["items"]} & {i["id"] for i in p2["items"]}
    assert p1["items"][0]["finished_at"] >= p1["items"][1]["finished_at"]
    for bad in ["limit=0", "limit=201", "offset=-1", "sort=phase", "started_at_from=not-a-date", "finished_at_to=2026-13-45"]:
        assert_envelope(admin.get(f"/admin/runs?{bad}"), 400, "invalid_request")


def test_admin_run_details(admin, user_key):
    alice = Client(BASE_URL, user_key)
    hers, _ = run(alice, **py("print('hi')"))
    d = admin.get(f"/admin/runs/{hers['id']}").json()
    assert d["user_id"] == "alice" and d["phase"] == "completed"
    assert d["resource_usage"]["limits"]["memory_mb"] == 512
    assert d["artifacts"] == [] and d["policy_hash"] == hers["policy_hash"]
    assert_envelope(admin.get("/admin/runs/00000000-0000-4000-8000-000000000000"), 404, "not_found")


def test_admin_idempotency_usage_and_summary(admin, user_key):
    alice = Client(BASE_URL, user_key)
    key = "adm-" + str(time.time())
    r = submit(alice, headers={"Idempotency-Key": key}, **py("print(1)"))
    rid = r.json()["run_id"]
    wait_run(alice, rid)
    items = admin.get("/admin/idempotency?endpoint=runs&user_id=alice").json()["items"]
    mine = [i for i in items if i["key"] == key]
    assert mine and mine[0]["object_id"] == rid and mine[0]["endpoint"] == "runs"
    assert mine[0]["user_id"] == "alice" and mine[0]["status"] == 202
    assert_envelope(admin.get("/admin/idempotency?endpoint=bogus"), 400, "invalid_request")
    usage = admin.get("/admin/usage").json()["items"]
    users = {u["user_id"]: u for u in usage}
    assert "alice" in users and users["alice"]["runs"] >= 1
    assert {"artifact_bytes", "log_bytes", "cpu_time_sec"} <= set(users["alice"])
    s = admin.get("/admin/usage/summary").json()
    assert set(s) == {"window", "totals", "by_runtime", "top_users"}
    assert s["totals"]["runs"] >= s["totals"]["completed"] >= 1
    assert s["by_runtime"][0]["runtime"] == "oci"
    assert any(u["user_id"] == "alice" for u in s["top_users"])
    empty = admin.get("/admin/usage/summary?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z").json()
    assert empty["totals"]["runs"] == 0 and empty["window"]["from"].startswith("2000-01-01")
    assert_envelope(admin.get("/admin/usage/summary?from=nope"), 400, "invalid_request")
    for path in ("/admin/idempotency", "/admin/usage", "/admin/usage/summary"):
        assert_envelope(alice.get(path), 403, "forbidden")
