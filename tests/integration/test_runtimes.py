"""GET /runtimes: every discovery field of the PRD, with types."""


def test_runtimes_fields_and_types(admin):
    r = admin.get("/runtimes")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["store_mode"] == "postgres"
    assert body["supported_spec_versions"] == ["1.0"]
    rts = {rt["name"]: rt for rt in body["runtimes"]}
    assert set(rts) == {"oci", "docker", "firecracker"}
    for rt in rts.values():
        assert isinstance(rt["available"], bool)
        assert isinstance(rt["default_images"], list)
        assert isinstance(rt["max_cpu"], float) and rt["max_cpu"] == 4.0
        for k, v in [("max_mem_mb", 8192), ("max_upload_mb", 64),
                     ("max_log_bytes", 10485760), ("queue_max_length", 100),
                     ("queue_ttl_sec", 120), ("workspace_cap_mb", 256),
                     ("artifact_ttl_hours", 24)]:
            assert type(rt[k]) is int and rt[k] == v, (k, rt[k])
        assert rt["supported_spec_versions"] == ["1.0"]
        assert rt["interactive_supported"] is False
        assert rt["egress_allowlist_supported"] is False
        assert "notes" in rt
    assert rts["oci"]["available"] is True
    assert rts["oci"]["default"] is True
    assert rts["oci"]["runtime_version"].startswith("crun")
    assert rts["firecracker"]["available"] is False
    assert "microVM" in rts["firecracker"]["notes"]
    assert rts["docker"]["available"] is False
    assert rts["docker"]["notes"]
