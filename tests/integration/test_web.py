"""The web panel, tested in a real browser (tests/web/panel.js: Debian's
chromium driven by playwright-core) against this stack: sign in, stream,
reconnect, cancel, upload, artifacts, deep link, history, phone width,
accessibility (axe-core), no outside requests. Screenshots of every step
land in BUILD/screenshots."""
import os
import shutil
import subprocess

from conftest import ADMIN_KEY, BASE_URL, BUILD, ROOT


def test_panel_in_a_real_browser():
    shots = os.path.join(BUILD, "screenshots")
    shutil.rmtree(shots, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_")}
    env.update(BASE_URL=BASE_URL, API_KEY=ADMIN_KEY, SHOTS=shots)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(k, None)
    r = subprocess.run(["node", "panel.js"], cwd=os.path.join(ROOT, "tests", "web"), env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"done":true' in r.stdout, r.stdout
    assert len([f for f in os.listdir(shots) if f.endswith(".png")]) >= 10
