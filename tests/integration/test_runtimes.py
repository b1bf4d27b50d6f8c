"""GET /runtimes: every discovery field of the PRD, with types."""
from conftest import effective_config


def test_runtimes_fields_and_types(admin):
    r = admin.get("/runtimes")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["store_mode"] == "postgres"
    assert body["supported_spec_versions"] == ["1.0", "1.1"]
    rts = {rt["name"]: rt for rt in body["runtimes"]}
    cfg = effective_config()
    assert set(rts) == {"oci", "docker", "firecracker"}
    for rt in rts.values():
        assert isinstance(rt["available"], bool)
        assert isinstance(rt["default_images"], list)
        assert isinstance(rt["max_cpu"], float) and rt["max_cpu"] == 4.0
        for k in ("max_mem_mb", "max_upload_mb", "max_log_bytes", "queue_max_length",
                  "queue_ttl_sec", "workspace_cap_mb", "artifact_ttl_hours"):
            assert type(rt[k]) is int and rt[k] == int(cfg["SANDBOX_" + k.upper()]), (k, rt[k])
        assert rt["supported_spec_versions"] == ["1.0", "1.1"]
        assert rt["interactive_supported"] is (rt["name"] != "firecracker")
        assert rt["egress_allowlist_supported"] is False
        assert "notes" in rt
    assert rts["oci"]["available"] is True
    assert rts["oci"]["default"] is True
    assert rts["oci"]["runtime_version"].startswith("crun")
    assert rts["firecracker"]["available"] is False
    assert "microVM" in rts["firecracker"]["notes"]
    # The suite's stack runs its own dockerd (STACK_DOCKER=1).
    assert rts["docker"]["available"] is True
    assert rts["docker"]["runtime_version"].startswith("docker ")
    # The image catalog: every image with its digest, aliases resolved.
    images = {i["name"]: i for i in body["images"]}
    assert set(images) >= {"python", "node", "shell"}
    for i in images.values():
        assert i["digest"].startswith("sha256:") and len(i["digest"]) == 71
    assert "python:3.11-slim" in images["python"]["aliases"]
    assert "node:20-alpine" in images["node"]["aliases"]
    assert f"python:3.11-slim@{images['python']['digest']}" in rts["oci"]["default_images"]
