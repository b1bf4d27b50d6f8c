/* app.js: the panel. Talks only to the public API (/api/v1/sandbox) with
 * the API key from session storage; pages: sign in, run (form + live
 * result), /runs/{id} (a deep link to a run), /history. */
"use strict";

const API = "/api/v1/sandbox";
const $ = (id) => document.getElementById(id);
const LANG = { python: ["python", "main.py", ["python3", "main.py"]],
               node: ["javascript", "main.js", ["node", "main.js"]],
               shell: ["shell", "main.sh", ["bash", "main.sh"]] };

class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code;
    this.details = e.details;
  }
}

const api = {
  key: sessionStorage.getItem("sandbox.key") || "",
  async req(method, path, body, headers = {}) {
    const h = { "X-API-KEY": this.key, ...headers };
    let payload = body;
    if (body !== undefined && !(body instanceof Blob) && !(body instanceof FormData)) {
      h["Content-Type"] = "application/json";
      payload = JSON.stringify(body);
    }
    const r = await fetch(API + path, { method, headers: h, body: payload });
    if (!r.ok) {
      let b = null;
      try { b = await r.json(); } catch (e) { /* not JSON */ }
      throw new ApiError(r.status, b);
    }
    return r;
  },
  async get(path) { return (await this.req("GET", path)).json(); },
  async post(path, body) { return (await this.req("POST", path, body === undefined ? {} : body)).json(); },
};

const fmtBytes = (n) => n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB`
  : `${(n / 1048576).toFixed(1)} MiB`;
const fmtMs = (ms) => ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

/* ---- pages ---- */

function show(page) {
  for (const id of ["signin", "runview", "history"]) $(id).hidden = id !== page;
  $("nav").hidden = page === "signin";
}

async function route() {
  if (!api.key) { show("signin"); $("apikey").focus(); return; }
  const p = location.pathname;
  const m = /^\/runs\/([0-9a-f-]{36})$/.exec(p);
  if (p === "/history") { show("history"); await loadHistory(); $("history-title").focus(); return; }
  show("runview");
  await loadRuntimes();
  if (m) await openRun(m[1]);
}

function go(path) {
  history.pushState({}, "", path);
  route();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href^='/']");
  if (!a || a.target || e.ctrlKey || e.metaKey || a.hasAttribute("download")) return;
  e.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", route);

/* ---- sign in ---- */

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = $("apikey").value.trim();
  $("signin-error").textContent = "";
  if (!key) { $("signin-error").textContent = "Enter an API key."; $("apikey").focus(); return; }
  api.key = key;
  try {
    await api.get("/runtimes");
  } catch (err) {
    api.key = "";
    $("signin-error").textContent = err.status === 401
      ? "This key is not valid (unknown or revoked). Check it and try again."
      : `Cannot reach the service: ${err.message}`;
    $("apikey").focus();
    return;
  }
  sessionStorage.setItem("sandbox.key", key);
  $("apikey").value = "";
  route();
});

$("signout").addEventListener("click", () => {
  sessionStorage.removeItem("sandbox.key");
  api.key = "";
  if (current.stream) current.stream.stop();
  go("/");
});

/* ---- the run form ---- */

let runtimes = null;
const pending = []; // files to add: {name, data: ArrayBuffer}

async function loadRuntimes() {
  if (runtimes) return;
  const r = await api.get("/runtimes");
  runtimes = r;
  const rt = $("runtime");
  rt.textContent = "";
  for (const x of r.runtimes) {
    rt.append(el("option", x.available ? { value: x.name } : { value: x.name, disabled: "" },
                 x.available ? x.name : `${x.name} (unavailable)`));
  }
  rt.value = (r.runtimes.find((x) => x.name === r.default_runtime && x.available)
    || r.runtimes.find((x) => x.available) || {}).name || "";
  fillImages();
  rt.addEventListener("change", fillImages);
  const caps = r.runtimes.find((x) => x.name === rt.value) || r;
  const maxCpu = caps.max_cpu || r.max_cpu, maxMem = caps.max_mem_mb || r.max_mem_mb;
  if (maxCpu) $("cpu").max = maxCpu;
  if (maxMem) $("memory").max = maxMem;
  $("image").addEventListener("change", setLang);
  await loadSessions();
}

/* Images of the chosen runtime: "name@sha256:…" → name (the digest in
 * the title). Python first. */
function fillImages() {
  const img = $("image"), keep = img.value;
  const rt = runtimes.runtimes.find((x) => x.name === $("runtime").value) || runtimes.runtimes[0];
  img.textContent = "";
  const list = (rt.default_images || []).map((s) => s.split("@"));
  list.sort((a, b) => (b[0].startsWith("python") - a[0].startsWith("python")));
  for (const [name, digest] of list) img.append(el("option", { value: name, title: digest || "" }, name));
  if ([...img.options].some((o) => o.value === keep)) img.value = keep;
  setLang();
}

function langOf() {
  const n = $("image").value || "";
  return n.startsWith("node") ? "node" : n.startsWith("python") ? "python" : "shell";
}

const SAMPLES = {
  python: 'print("hello from the sandbox")\nfor i in range(3):\n    print("line", i)\n',
  node: 'console.log("hello from the sandbox");\nfor (let i = 0; i < 3; i++) console.log("line", i);\n',
  shell: 'echo "hello from the sandbox"\nfor i in 1 2 3; do echo "line $i"; done\n',
};

function setLang() {
  const l = langOf();
  Editor.setLanguage(LANG[l][0]);
  const cur = Editor.value;
  if (Object.values(SAMPLES).includes(cur) || !cur.trim()) Editor.value = SAMPLES[l];
}

async function loadSessions() {
  const t = $("target"), keep = t.value;
  for (const o of [...t.options]) if (o.value && o.value !== "new") o.remove();
  const s = await api.get("/sessions?state=ready&limit=20");
  for (const x of s.items) {
    t.append(el("option", { value: x.session_id }, `Session ${x.session_id.slice(0, 8)} (${x.base_image})`));
  }
  if ([...t.options].some((o) => o.value === keep)) t.value = keep;
}

function addFiles(list) {
  for (const f of list) {
    const reader = new FileReader();
    reader.onload = () => {
      pending.push({ name: f.name, data: reader.result });
      renderPending();
    };
    reader.readAsArrayBuffer(f);
  }
}

function renderPending() {
  const ul = $("filelist");
  ul.textContent = "";
  pending.forEach((f, i) => {
    ul.append(el("li", {}, el("span", { class: "mono" }, f.name),
      el("span", { class: "size" }, fmtBytes(f.data.byteLength)),
      el("button", { type: "button", class: "link", "aria-label": `Remove ${f.name}`,
                     onclick: () => { pending.splice(i, 1); renderPending(); } }, "Remove")));
  });
}

const dz = $("dropzone");
dz.addEventListener("click", () => $("fileinput").click());
dz.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); $("fileinput").click(); } });
dz.addEventListener("dragover", (e) => { e.preventDefault(); dz.classList.add("over"); });
dz.addEventListener("dragleave", () => dz.classList.remove("over"));
dz.addEventListener("drop", (e) => { e.preventDefault(); dz.classList.remove("over"); addFiles(e.dataTransfer.files); });
$("fileinput").addEventListener("change", (e) => { addFiles(e.target.files); e.target.value = ""; });

function b64(buf) {
  const bytes = new Uint8Array(buf);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/* Upload with progress (XHR: fetch has no upload progress). */
function upload(sessionId, files) {
  return new Promise((resolve, reject) => {
    const fd = new FormData();
    for (const f of files) fd.append("files", new Blob([f.data]), f.name);
    const xhr = new XMLHttpRequest();
    const bar = $("upload-progress");
    bar.hidden = false;
    bar.value = 0;
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = (100 * e.loaded) / e.total; };
    xhr.onload = () => {
      bar.value = 100;
      if (xhr.status >= 200 && xhr.status < 300) resolve(JSON.parse(xhr.responseText));
      else {
        let b = null;
        try { b = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
        reject(new ApiError(xhr.status, b));
      }
    };
    xhr.onerror = () => reject(new Error("upload failed"));
    xhr.open("POST", `${API}/sessions/${sessionId}/files`);
    xhr.setRequestHeader("X-API-KEY", api.key);
    xhr.send(fd);
  });
}

function buildSpec(sessionId, withPending) {
  const l = langOf(), [, file, command] = LANG[l];
  const spec = { spec_version: $("interactive").checked ? "1.1" : "1.0" };
  if (sessionId) spec.session_id = sessionId;
  else { spec.base_image = $("image").value; spec.runtime = $("runtime").value; }
  spec.command = command;
  const files = [{ path: file, content_b64: b64(new TextEncoder().encode(Editor.value)) }];
  if (withPending) for (const f of pending) files.push({ path: f.name, content_b64: b64(f.data) });
  spec.files = files;
  spec.timeout_sec = Number($("timeout").value) || 60;
  spec.startup_timeout_sec = Number($("startup").value) || 20;
  spec.resources = { cpu: Number($("cpu").value) || 1, memory_mb: Number($("memory").value) || 512 };
  const cap = $("capture").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (cap.length) spec.capture_patterns = cap;
  if ($("interactive").checked) spec.interactive = true;
  return spec;
}

async function submitRun() {
  const err = $("form-error");
  err.textContent = "";
  $("runbtn").disabled = true;
  try {
    let sid = $("target").value;
    if (sid === "new") {
      const s = await api.post("/sessions", { spec_version: "1.0", base_image: $("image").value,
        runtime: $("runtime").value });
      sid = s.session_id;
      await loadSessions();
      $("target").value = sid;
    }
    if (sid && pending.length) {
      await upload(sid, pending);
      pending.length = 0;
      renderPending();
    }
    const spec = buildSpec(sid, !sid);
    const r = await api.post("/runs", spec);
    sessionStorage.setItem(`sandbox.spec.${r.run_id}`, JSON.stringify(spec));
    if (!sid) { pending.length = 0; renderPending(); }
    history.pushState({}, "", `/runs/${r.run_id}`);
    await openRun(r.run_id);
  } catch (e) {
    err.textContent = e.details && e.details.rejected
      ? `${e.message}: ${e.details.rejected.map((x) => `${x.entry} (${x.reason})`).join(", ")}`
      : e.message;
  } finally {
    $("runbtn").disabled = false;
  }
}

$("run-form").addEventListener("submit", (e) => { e.preventDefault(); submitRun(); });
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !$("runview").hidden) {
    e.preventDefault();
    submitRun();
  }
});
$("copyspec").addEventListener("click", async () => {
  const spec = buildSpec($("target").value === "new" ? "" : $("target").value, true);
  showRepro(spec);
  await copy(JSON.stringify(spec, null, 2));
});

/* ---- one run: live output, timeline, summary, files ---- */

const current = { id: null, stream: null, out: new OutputView($("output")), marks: {} };

function mark(phase, at) {
  if (current.marks[phase]) return;
  current.marks[phase] = at || Date.now();
  renderTimeline();
}

function renderTimeline() {
  const ol = $("timeline");
  ol.textContent = "";
  const t0 = current.marks.queued;
  for (const p of ["queued", "starting", "running", "completed", "failed", "timed_out", "killed"]) {
    if (!current.marks[p]) continue;
    const cls = p === "completed" ? "good" : ["failed", "timed_out", "killed"].includes(p) ? "bad" : "done";
    const dt = t0 ? ` +${fmtMs(current.marks[p] - t0)}` : "";
    ol.append(el("li", { class: cls }, `${p}${p === "queued" ? "" : dt}`));
  }
}

async function openRun(id) {
  if (current.stream) current.stream.stop();
  current.id = id;
  current.marks = {};
  renderTimeline();
  current.out.clear();
  $("result").hidden = false;
  $("run-id").textContent = id;
  $("summary").hidden = true;
  $("artifacts").hidden = true;
  $("preview").hidden = true;
  $("cancelbtn").disabled = false;
  let run;
  try {
    run = await api.get(`/runs/${id}`);
  } catch (e) {
    current.out.meta(`cannot open run ${id}: ${e.message}`);
    return;
  }
  const ts = (s) => (s ? Date.parse(s) : 0);
  mark("queued", ts(run.created_at));
  if (run.starting_at) mark("starting", ts(run.starting_at));
  if (run.started_at) mark("running", ts(run.started_at));
  $("stdin-form").hidden = !run.interactive;
  showRepro(JSON.parse(sessionStorage.getItem(`sandbox.spec.${id}`) || "null") || specOf(run));
  if (run.session_id) { $("workspace").hidden = false; $("session-id").textContent = run.session_id; loadWorkspace(run.session_id); }
  else $("workspace").hidden = true;
  current.sessionId = run.session_id;
  current.stream = new RunStream(api, id, {
    frame: onFrame,
    status: (t) => { $("conn").textContent = t; },
    end: () => finish(id),
  });
  current.stream.connect();
  $("result-title").focus && $("result").scrollIntoView({ block: "nearest" });
}

function onFrame(f) {
  if (f.type === "stdout" || f.type === "stderr") current.out.output(f.type, f.encoding, f.data);
  else if (f.type === "truncated") current.out.meta(`[output truncated: ${f.reason}]`);
  else if (f.type === "event") {
    if (f.event === "phase" && f.data) mark(f.data.phase);
    else if (f.event === "end" && f.data) mark(f.data.phase);
    else if (f.event === "resume") current.out.meta(`[earlier output skipped: ${JSON.stringify(f.data)}]`);
    else if (f.event === "error" && f.data) current.out.meta(`[stream: ${f.data.message || f.data.code}]`);
    else if (f.event === "stdin_closed") { current.out.meta("[input closed]"); $("stdin-form").hidden = true; }
  }
}

async function finish(id) {
  if (id !== current.id) return;
  $("cancelbtn").disabled = true;
  $("conn").textContent = "ended";
  const run = await api.get(`/runs/${id}`);
  mark(run.phase, Date.parse(run.finished_at) || Date.now());
  const u = run.resource_usage || {};
  const dl = $("summary");
  dl.textContent = "";
  const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, String(v)));
  add("Phase", run.phase);
  add("Exit code", run.exit_code === null ? "—" : run.exit_code);
  if (run.reason_code) add("Reason", run.reason_code);
  if (run.message) add("Message", run.message);
  if (u.cpu_time_sec !== undefined) add("CPU time", `${u.cpu_time_sec} s`);
  if (u.wall_time_sec !== undefined) add("Wall time", `${u.wall_time_sec} s`);
  if (u.peak_rss_mb !== undefined) add("Peak memory", `${u.peak_rss_mb} MB`);
  if (u.pids !== undefined) add("Peak processes", u.pids);
  add("Output", fmtBytes(u.log_bytes || 0));
  dl.hidden = false;
  await loadArtifacts(id);
  if (current.sessionId) loadWorkspace(current.sessionId);
}

$("cancelbtn").addEventListener("click", async () => {
  if (!current.id) return;
  try {
    const r = await api.post(`/runs/${current.id}/cancel`);
    current.out.meta(r.cancelled ? "[cancel requested]" : `[${r.message}]`);
  } catch (e) {
    current.out.meta(`[cancel failed: ${e.message}]`);
  }
});

$("stdin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const line = $("stdin").value + "\n";
  if (current.stream && current.stream.send({ type: "stdin", encoding: "utf8", data: line })) $("stdin").value = "";
});
$("stdin-close").addEventListener("click", () => current.stream && current.stream.send({ type: "stdin_close" }));

/* Authenticated downloads: fetched with the key, saved from a blob URL. */
async function download(path, name) {
  const r = await api.req("GET", path);
  const url = URL.createObjectURL(await r.blob());
  const a = el("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function preview(path, name) {
  const r = await api.req("GET", path, undefined, { Range: "bytes=0-16383" });
  const buf = new Uint8Array(await r.arrayBuffer());
  let text;
  try { text = new TextDecoder("utf-8", { fatal: true }).decode(buf); } catch (e) { text = `[${name}: binary, not previewed]`; }
  $("preview").hidden = false;
  $("preview-title").textContent = `Preview: ${name}`;
  $("preview-body").textContent = text;
}

function fileRow(label, size, path, previewable) {
  const enc = path.split("/").map(encodeURIComponent).join("/");
  return { enc, row: el("li", {}, el("span", { class: "mono" }, label), el("span", { class: "size" }, size)) };
}

async function loadArtifacts(id) {
  const a = await api.get(`/runs/${id}/artifacts`);
  const ul = $("artifact-list");
  ul.textContent = "";
  $("artifacts").hidden = false;
  if (!a.items.length) ul.append(el("li", {}, a.expired ? "Expired." : "No artifacts (see capture patterns)."));
  for (const x of a.items) {
    const { row } = fileRow(x.path, x.type === "symlink" ? `symlink → ${x.target}` : fmtBytes(x.size), x.path);
    if (x.download_url) {
      const rel = x.download_url.replace(API, "");
      row.append(el("span", {},
        el("button", { type: "button", class: "link", onclick: () => download(rel, x.path.split("/").pop()) }, "Download"),
        " ",
        el("button", { type: "button", class: "link", onclick: () => preview(rel, x.path) }, "Preview")));
    }
    ul.append(row);
  }
}

async function loadWorkspace(sid) {
  let w;
  try { w = await api.get(`/sessions/${sid}/files`); } catch (e) { $("workspace-list").textContent = e.message; return; }
  const ul = $("workspace-list");
  ul.textContent = "";
  if (!w.items.length) ul.append(el("li", {}, "Empty."));
  for (const x of w.items) {
    const label = x.type === "dir" ? `${x.path}/` : x.path;
    const { enc, row } = fileRow(label, x.type === "file" ? fmtBytes(x.size) : x.type, x.path);
    if (x.type === "file") {
      row.append(el("span", {},
        el("button", { type: "button", class: "link", onclick: () => download(`/sessions/${sid}/files/${enc}`, x.path.split("/").pop()) }, "Download"),
        " ",
        el("button", { type: "button", class: "link", onclick: () => preview(`/sessions/${sid}/files/${enc}`, x.path) }, "Preview")));
    }
    ul.append(row);
  }
  if (w.truncated) ul.append(el("li", {}, "… (listing cut)"));
}

/* ---- reproduce ---- */

function specOf(run) {
  const s = { spec_version: run.spec_version, command: run.command };
  if (run.session_id) s.session_id = run.session_id;
  else { s.base_image = run.base_image; s.runtime = run.runtime; }
  s.timeout_sec = run.timeout_sec;
  s.startup_timeout_sec = run.startup_timeout_sec;
  const l = (run.resource_usage || {}).limits;
  if (l) s.resources = { cpu: l.cpu, memory_mb: l.memory_mb, pids: l.pids };
  if (run.capture_patterns && run.capture_patterns.length) s.capture_patterns = run.capture_patterns;
  return s;
}

function showRepro(spec) {
  const json = JSON.stringify(spec, null, 2);
  $("repro").hidden = false;
  $("repro-json").value = json;
  $("repro-curl").value = `curl -sS -H "X-API-KEY: $SANDBOX_API_KEY" -H 'Content-Type: application/json' \\\n` +
    `  --data-binary @- ${location.origin}${API}/runs <<'SPEC'\n${json}\nSPEC`;
}

async function copy(text) {
  try { await navigator.clipboard.writeText(text); } catch (e) { /* the text areas show it */ }
}
$("copy-json").addEventListener("click", () => copy($("repro-json").value));
$("copy-curl").addEventListener("click", () => copy($("repro-curl").value));

/* ---- history ---- */

let historyRuns = [];
async function loadHistory() {
  const phase = $("f-phase").value;
  const r = await api.get(`/runs?limit=100${phase ? `&phase=${phase}` : ""}`);
  historyRuns = r.items;
  renderHistory();
  const s = await api.get("/sessions?limit=50");
  const tb = $("sessions-body");
  tb.textContent = "";
  for (const x of s.items) {
    tb.append(el("tr", {}, el("td", { class: "mono" }, x.session_id.slice(0, 8)), el("td", {}, x.state),
      el("td", {}, x.base_image), el("td", {}, new Date(x.expires_at).toLocaleString())));
  }
}

function renderHistory() {
  const q = $("f-text").value.toLowerCase();
  const tb = $("runs-body");
  tb.textContent = "";
  for (const x of historyRuns) {
    const cmd = (x.command || []).join(" ");
    if (q && !cmd.toLowerCase().includes(q) && !x.base_image.toLowerCase().includes(q)) continue;
    tb.append(el("tr", {},
      el("td", {}, el("a", { href: `/runs/${x.id}`, class: "mono" }, x.id.slice(0, 8))),
      el("td", { class: `phase-${x.phase}` }, x.phase), el("td", {}, x.base_image),
      el("td", { class: "mono" }, cmd.length > 60 ? cmd.slice(0, 60) + "…" : cmd),
      el("td", {}, new Date(x.created_at).toLocaleString())));
  }
}
$("f-phase").addEventListener("change", loadHistory);
$("f-text").addEventListener("input", renderHistory);
$("history-filter").addEventListener("submit", (e) => e.preventDefault());

/* ---- start ---- */

Editor.init($("code"), $("highlight"), $("gutter"));
for (const id of ["result-title", "history-title"]) $(id).setAttribute("tabindex", "-1");
route().catch((e) => {
  if (e.status === 401) { sessionStorage.removeItem("sandbox.key"); api.key = ""; show("signin"); }
  else $("form-error").textContent = e.message;
});
