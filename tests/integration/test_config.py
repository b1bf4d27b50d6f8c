"""Configuration errors stop a process before it starts, naming the key."""
import os
import subprocess

from conftest import BUILD, server_env


def _run(binary, *args, **env):
    return subprocess.run([os.path.join(BUILD, binary), *args],
                          env=server_env(**env), capture_output=True,
                          text=True, timeout=20)


def test_check_mode_prints_config_with_secrets_redacted():
    for b in ("sandbox-api", "sandbox-supervisor"):
        r = _run(b, "-n")
        assert r.returncode == 0, r.stderr
        assert "# configuration ok" in r.stdout
        assert "SANDBOX_QUEUE_TTL_SEC = 120" in r.stdout
        assert "SANDBOX_WS_SIGNING_SECRET = [redacted]" in r.stdout
        secret = [l for l in open(server_env()["SANDBOX_CONFIG_FILE"])
                  if l.startswith("SANDBOX_WS_SIGNING_SECRET")][0].split("=")[1].strip()
        assert secret not in r.stdout + r.stderr


def test_unknown_key_refuses_to_start():
    for b in ("sandbox-api", "sandbox-supervisor"):
        for args in (["-n"], []):
            r = _run(b, *args, SANDBOX_NO_SUCH_SETTING="1")
            assert r.returncode != 0, (b, args)
            assert "SANDBOX_NO_SUCH_SETTING" in r.stderr


def test_out_of_range_value_refuses_to_start():
    r = _run("sandbox-api", "-n", SANDBOX_MAX_CPU="100000")
    assert r.returncode != 0 and "SANDBOX_MAX_CPU" in r.stderr
    r = _run("sandbox-supervisor", SANDBOX_QUEUE_TTL_SEC="-5")
    assert r.returncode != 0 and "SANDBOX_QUEUE_TTL_SEC" in r.stderr
    r = _run("sandbox-api", "-n", SANDBOX_DEFAULT_RUNTIME="vmware")
    assert r.returncode != 0 and "SANDBOX_DEFAULT_RUNTIME" in r.stderr


def test_unknown_key_in_file_refuses(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("SANDBOX_MAX_LOG_BYTES = 2048\nSANDBOX_TYPO_KEY = 1\n")
    r = _run("sandbox-api", "-n", "-c", str(conf))
    assert r.returncode != 0
    assert "SANDBOX_TYPO_KEY" in r.stderr and ":2:" in r.stderr
