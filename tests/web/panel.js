/* The web panel in a real browser: Debian's chromium driven by
 * playwright-core, against the real stack. Each step asserts what a user
 * would notice and saves a screenshot. Run by tests/integration/test_web.py
 * with BASE_URL, API_KEY, SHOTS (a directory).
 * Exit status 0 when every step passed. */
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const path = require("path");
const assert = require("assert");

const BASE = process.env.BASE_URL;
const KEY = process.env.API_KEY;
const SHOTS = process.env.SHOTS;
const AXE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
fs.mkdirSync(SHOTS, { recursive: true });

let n = 0;
async function shot(page, name) {
  n++;
  await page.screenshot({ path: path.join(SHOTS, `${String(n).padStart(2, "0")}-${name}.png`), fullPage: true });
}

async function axe(page, what) {
  await page.evaluate(AXE);
  const r = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = r.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepStrictEqual(bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((x) => x.target).join(" ")})`), [],
    `${what}: accessibility violations`);
}

const step = async (name, fn) => {
  const t0 = Date.now();
  await fn();
  console.log(JSON.stringify({ step: name, ok: true, ms: Date.now() - t0 }));
};

async function setCode(page, code) {
  await page.evaluate((c) => { Editor.value = c; }, code);
}

async function runAndWait(page, phase, timeout = 30000) {
  const before = await page.textContent("#run-id");
  await page.keyboard.press("Control+Enter");
  await page.waitForFunction((b) => document.getElementById("run-id").textContent !== b, before,
                             { timeout });
  await page.waitForFunction((p) => [...document.querySelectorAll("#timeline li")]
    .some((li) => li.textContent.startsWith(p)), phase, { timeout });
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--headless=new"],
  });
  // bypassCSP: the page's own CSP forbids eval, which playwright's polling needs.
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true, acceptDownloads: true, bypassCSP: true,
                                         viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  const foreign = [];
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(BASE) && !u.startsWith(BASE.replace("https:", "wss:")) &&
        !u.startsWith("blob:") && !u.startsWith("data:")) foreign.push(u);
  });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));

  await step("sign in: a bad key is refused clearly", async () => {
    await page.goto(BASE + "/");
    await page.waitForSelector("#signin:not([hidden])");
    await axe(page, "sign-in page");
    await page.fill("#apikey", "sbx_000000000000_" + "0".repeat(48));
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("signin-error").textContent.includes("not valid"));
    await shot(page, "signin-bad-key");
    assert.strictEqual(await page.evaluate(() => sessionStorage.getItem("sandbox.key")), null);
  });

  await step("sign in with a good key, keyboard only", async () => {
    await page.fill("#apikey", "");
    await page.focus("#apikey");
    await page.keyboard.type(KEY);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#runview:not([hidden])");
    await page.waitForFunction(() => document.getElementById("image").options.length > 0);
    assert.ok(!page.url().includes(KEY), "the key never appears in a URL");
    await axe(page, "run page");
    await shot(page, "run-form");
  });

  let firstRun;
  await step("run Python: lines stream in before the run ends", async () => {
    await page.selectOption("#image", "python:3.11-slim");
    await setCode(page, "import time, sys\nfor i in range(6):\n    print('tick', i, flush=True)\n"
      + "    time.sleep(0.4)\nprint('\\x1b[31mred\\x1b[0m', file=sys.stderr)\n");
    await page.keyboard.press("Control+Enter");
    await page.waitForFunction(() => document.getElementById("output").textContent.includes("tick 1"),
                               null, { timeout: 20000 });
    const ended = await page.evaluate(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => /^(completed|failed)/.test(li.textContent)));
    assert.ok(!ended, "output was shown while the run was still running");
    await shot(page, "streaming");
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => li.textContent.startsWith("completed")), null, { timeout: 30000 });
    const out = await page.textContent("#output");
    for (let i = 0; i < 6; i++) assert.strictEqual(out.split(`tick ${i}\n`).length - 1, 1, out);
    const red = await page.$eval("#output .stderr", (s) => [s.textContent, getComputedStyle(s).color]);
    assert.strictEqual(red[0], "red");
    assert.notStrictEqual(red[1], "rgb(230, 232, 235)", "ANSI colour rendered");
    const summary = await page.textContent("#summary");
    assert.ok(summary.includes("Exit code") && summary.includes("CPU time"), summary);
    firstRun = page.url().split("/runs/")[1];
    assert.ok(/^[0-9a-f-]{36}$/.test(firstRun), page.url());
    assert.ok((await page.inputValue("#repro-curl")).includes("/api/v1/sandbox/runs"));
    await shot(page, "completed");
  });

  await step("a dropped connection resumes without losing or repeating lines", async () => {
    await setCode(page, "import time\nfor i in range(8):\n    print('beat', i, flush=True)\n    time.sleep(0.5)\n");
    await page.keyboard.press("Control+Enter");
    await page.waitForFunction(() => document.getElementById("output").textContent.includes("beat 1"),
                               null, { timeout: 20000 });
    await page.evaluate(() => current.stream.drop());
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => li.textContent.startsWith("completed")), null, { timeout: 30000 });
    const out = await page.textContent("#output");
    for (let i = 0; i < 8; i++) assert.strictEqual(out.split(`beat ${i}\n`).length - 1, 1, out);
    assert.ok((await page.textContent("#conn")).length > 0);
    await shot(page, "reconnected");
  });

  await step("cancel a long run", async () => {
    await setCode(page, "import time\nprint('started', flush=True)\ntime.sleep(120)\n");
    await page.keyboard.press("Control+Enter");
    await page.waitForFunction(() => document.getElementById("output").textContent.includes("started"),
                               null, { timeout: 20000 });
    await page.click("#cancelbtn");
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => li.textContent.startsWith("killed")), null, { timeout: 30000 });
    await page.waitForFunction(() => document.getElementById("summary").textContent.includes("canceled_by_user"));
    await shot(page, "cancelled");
  });

  await step("an interactive run takes input from the input line", async () => {
    await page.click("details.limits summary");
    await page.check("#interactive");
    await setCode(page, "name = input()\nprint('hello', name, flush=True)\n");
    await page.keyboard.press("Control+Enter");
    await page.waitForSelector("#stdin-form:not([hidden])");
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => li.textContent.startsWith("running")), null, { timeout: 20000 });
    await page.fill("#stdin", "world");
    await page.press("#stdin", "Enter");
    await page.waitForFunction(() => document.getElementById("output").textContent.includes("hello world"),
                               null, { timeout: 20000 });
    await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")]
      .some((li) => li.textContent.startsWith("completed")), null, { timeout: 30000 });
    await shot(page, "interactive");
    await page.uncheck("#interactive");
  });

  await step("upload a file into a new session and see it in the tree", async () => {
    await page.selectOption("#target", "new");
    // A real drop event carrying a file, as a person dragging one would.
    await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(["a,b\n1,2\n"], "data.csv", { type: "text/csv" }));
      const dz = document.getElementById("dropzone");
      for (const type of ["dragenter", "dragover", "drop"]) {
        dz.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    });
    await page.waitForFunction(() => document.getElementById("filelist").textContent.includes("data.csv"));
    await setCode(page, "import os, json\nos.makedirs('out', exist_ok=True)\n"
      + "json.dump({'files': sorted(os.listdir('.'))}, open('out/result.json', 'w'))\n"
      + "print(open('data.csv').read())\n");
    await runAndWait(page, "completed");
    await page.waitForFunction(() => document.getElementById("workspace-list").textContent.includes("data.csv"));
    assert.ok((await page.textContent("#output")).includes("1,2"));
    assert.strictEqual(await page.$eval("#upload-progress", (p) => p.value), 100);
    await shot(page, "session-tree");
  });

  await step("preview and download an artifact", async () => {
    await page.waitForFunction(() => document.getElementById("artifact-list").textContent.includes("out/result.json"));
    const row = page.locator("#artifact-list li", { hasText: "out/result.json" });
    await row.getByRole("button", { name: "Preview" }).click();
    await page.waitForFunction(() => document.getElementById("preview-body").textContent.includes("data.csv"));
    const [dl] = await Promise.all([page.waitForEvent("download"),
                                    row.getByRole("button", { name: "Download" }).click()]);
    const file = await dl.path();
    const body = JSON.parse(fs.readFileSync(file, "utf8"));
    assert.ok(body.files.includes("data.csv"), JSON.stringify(body));
    assert.strictEqual(dl.suggestedFilename(), "result.json");
    await shot(page, "artifact");
  });

  await step("a deep link reopens a run with its history", async () => {
    await page.goto(`${BASE}/runs/${firstRun}`);
    await page.waitForFunction(() => document.getElementById("output").textContent.includes("tick 5"),
                               null, { timeout: 20000 });
    await page.waitForFunction(() => !document.getElementById("summary").hidden);
    assert.ok((await page.textContent("#run-id")).includes(firstRun));
    await shot(page, "deep-link");
  });

  await step("history lists the runs and sessions", async () => {
    await page.click("nav >> text=History");
    await page.waitForFunction((id) => document.getElementById("runs-body").textContent.includes(id.slice(0, 8)),
                               firstRun);
    await axe(page, "history page");
    await page.selectOption("#f-phase", "killed");
    await page.waitForFunction(() => [...document.querySelectorAll("#runs-body tr")]
      .every((tr) => tr.textContent.includes("killed")));
    await shot(page, "history");
  });

  await step("phone width", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${BASE}/`);
    await page.waitForSelector("#runview:not([hidden])");
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
    assert.ok(!overflow, "no horizontal scrolling at phone width");
    await axe(page, "run page (phone)");
    await shot(page, "phone");
  });

  assert.deepStrictEqual(foreign, [], "requests outside the service");
  assert.deepStrictEqual(errors, [], "script errors in the page");
  await browser.close();
  console.log(JSON.stringify({ done: true, screenshots: n }));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
