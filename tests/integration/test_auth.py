"""API keys: stored hashed, two header forms, 401 for missing, bad and
revoked keys, managed with sandboxctl."""
import hashlib

from conftest import BASE_URL, Client, assert_envelope, psql, sandboxctl


def test_missing_key_is_401(anon):
    r = anon.get("/runtimes")
    assert_envelope(r, 401, "unauthorized")
    assert r.headers["WWW-Authenticate"] == "Bearer"


def test_wrong_key_is_401():
    for bad in ["sbx_000000000000_" + "0" * 48, "x", "a" * 300]:
        assert_envelope(Client(BASE_URL, bad).get("/runtimes"), 401, "unauthorized")


def test_both_header_forms_accepted(user_key, anon):
    assert anon.get("/runtimes", headers={"X-API-KEY": user_key}).status_code == 200
    r = anon.get("/runtimes", headers={"Authorization": f"Bearer {user_key}"})
    assert r.status_code == 200, r.text
    r = anon.get("/runtimes", headers={"Authorization": f"Basic {user_key}"})
    assert_envelope(r, 401, "unauthorized")


def test_only_the_hash_is_stored(user_key):
    key_id = "key_" + user_key.split("_")[1]
    rows = psql(f"SELECT key_hash FROM api_keys WHERE id = '{key_id}'")
    assert rows == [[hashlib.sha256(user_key.encode()).hexdigest()]]
    dump = psql("SELECT string_agg(t::text, ',') FROM api_keys t")
    assert user_key not in dump[0][0]


def test_revoked_key_is_401():
    key = sandboxctl("key", "create", "--user", "bob").stdout.strip()
    c = Client(BASE_URL, key)
    assert c.get("/runtimes").status_code == 200
    key_id = "key_" + key.split("_")[1]
    out = sandboxctl("key", "revoke", key_id)
    assert f"revoked {key_id}" in out.stdout
    assert_envelope(c.get("/runtimes"), 401, "unauthorized")
    listing = sandboxctl("key", "list", "--user", "bob").stdout
    line = [l for l in listing.splitlines() if l.startswith(key_id)][0]
    assert line.split()[5] != "-"  # revoked timestamp shown


def test_key_list_shows_role_and_use(user_key, admin):
    admin.get("/runtimes")
    listing = sandboxctl("key", "list").stdout.splitlines()
    assert listing[0].split()[:3] == ["ID", "USER", "ROLE"]
    admin_rows = [l.split() for l in listing[1:] if l.split()[1] == "admin"]
    assert admin_rows and admin_rows[0][2] == "admin"
    assert admin_rows[0][4] != "-"  # last used is recorded


def test_revoking_unknown_key_fails():
    r = sandboxctl("key", "revoke", "key_doesnotexist", check=False)
    assert r.returncode != 0 and "no key" in r.stderr
