"""Migrations: numbered, recorded, re-runnable, tamper-evident."""
import os
import shutil

from conftest import ROOT, psql, sandboxctl


def test_applying_twice_is_a_no_op():
    before = psql("SELECT version, sha256, applied_at FROM schema_migrations ORDER BY 1")
    files = sorted(f for f in os.listdir(os.path.join(ROOT, "sql")) if f[:3].isdigit())
    assert [int(r[0]) for r in before] == [int(f[:3]) for f in files]
    r = sandboxctl("migrate", os.path.join(ROOT, "sql"))
    assert "schema up to date" in r.stdout
    assert psql("SELECT version, sha256, applied_at FROM schema_migrations ORDER BY 1") == before


def test_changed_migration_is_refused(tmp_path):
    d = tmp_path / "sql"
    shutil.copytree(os.path.join(ROOT, "sql"), d)
    first = sorted(p for p in d.iterdir() if p.name[:3].isdigit())[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    r = sandboxctl("migrate", str(d), check=False)
    assert r.returncode != 0
    assert "changed after it was applied" in r.stderr
