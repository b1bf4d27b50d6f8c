/* output.js: a run's stream. RunStream keeps a WebSocket to
 * GET /runs/{id}/stream (a signed URL fetched fresh for every connection),
 * reconnects by itself with backoff and resumes from the last seq it saw,
 * so no frame is shown twice or lost. Output renders stdout and stderr
 * apart, ANSI SGR colours as spans, binary data as a safe summary. */
"use strict";

const ANSI_COLORS = ["#4d4d4d", "#ff6b6b", "#5fd35f", "#f5d76e", "#6ea8fe", "#e07be0", "#56d6d6", "#e6e8eb"];
const ANSI_BRIGHT = ["#8a8f98", "#ff9b9b", "#8fef8f", "#ffe89a", "#9ec5fe", "#f0a6f0", "#8ff0f0", "#ffffff"];

class OutputView {
  constructor(el) {
    this.el = el;
    this.state = {};
    this.decoder = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  }

  clear() {
    this.el.textContent = "";
    this.state = {};
  }

  meta(text) {
    const s = document.createElement("span");
    s.className = "meta";
    s.textContent = text + "\n";
    this.el.appendChild(s);
    this.scroll();
  }

  scroll() {
    const el = this.el;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 80) el.scrollTop = el.scrollHeight;
  }

  /* Text with ANSI SGR sequences into styled spans; other escapes dropped. */
  ansi(text, cls) {
    const frag = document.createDocumentFragment();
    const re = /\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;
    let last = 0, m;
    const emit = (t) => {
      if (!t) return;
      const s = document.createElement("span");
      s.className = cls;
      const st = this.state;
      if (st.fg) s.style.color = st.fg;
      if (st.bg) s.style.backgroundColor = st.bg;
      if (st.bold) s.style.fontWeight = "700";
      if (st.underline) s.style.textDecoration = "underline";
      s.textContent = t;
      frag.appendChild(s);
    };
    while ((m = re.exec(text))) {
      emit(text.slice(last, m.index));
      last = re.lastIndex;
      if (m[1] === undefined) continue; // not SGR: dropped
      const codes = m[1] === "" ? [0] : m[1].split(";").map(Number);
      for (let i = 0; i < codes.length; i++) {
        const c = codes[i];
        if (c === 0) this.state = {};
        else if (c === 1) this.state.bold = true;
        else if (c === 4) this.state.underline = true;
        else if (c === 22) this.state.bold = false;
        else if (c === 24) this.state.underline = false;
        else if (c >= 30 && c <= 37) this.state.fg = ANSI_COLORS[c - 30];
        else if (c >= 90 && c <= 97) this.state.fg = ANSI_BRIGHT[c - 90];
        else if (c === 39) this.state.fg = null;
        else if (c >= 40 && c <= 47) this.state.bg = ANSI_COLORS[c - 40];
        else if (c === 49) this.state.bg = null;
        else if ((c === 38 || c === 48) && codes[i + 1] === 5) i += 2;
        else if ((c === 38 || c === 48) && codes[i + 1] === 2) i += 4;
      }
    }
    emit(text.slice(last));
    return frag;
  }

  output(type, encoding, data) {
    let text;
    if (encoding === "base64") {
      const bin = Uint8Array.from(atob(data), (ch) => ch.charCodeAt(0));
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(bin);
      } catch (e) {
        const s = document.createElement("span");
        s.className = "bin";
        const hex = Array.from(bin.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join(" ");
        s.textContent = `[${bin.length} bytes of binary ${type}: ${hex}${bin.length > 16 ? " …" : ""}]\n`;
        this.el.appendChild(s);
        this.scroll();
        return;
      }
    } else {
      text = data;
    }
    this.el.appendChild(this.ansi(text, type));
    this.scroll();
  }
}

class RunStream {
  /* api: the App's API client; on: {frame(f), status(text), end(f)} */
  constructor(api, runId, on) {
    this.api = api;
    this.runId = runId;
    this.on = on;
    this.lastSeq = 0;
    this.ended = false;
    this.stopped = false;
    this.attempt = 0;
    this.ws = null;
  }

  async connect() {
    if (this.stopped || this.ended) return;
    let url;
    try {
      const run = await this.api.get(`/runs/${this.runId}`);
      url = run.log_stream_url;
    } catch (e) {
      return this.retry(`cannot reach the run: ${e.message}`);
    }
    if (this.lastSeq > 0) url += (url.includes("?") ? "&" : "?") + "from_seq=" + (this.lastSeq + 1);
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.on.status(this.lastSeq ? `reconnected; resumed after frame ${this.lastSeq}` : "live");
    };
    ws.onmessage = (m) => {
      let f;
      try { f = JSON.parse(m.data); } catch (e) { return; }
      if (typeof f.seq === "number") {
        if (f.seq <= this.lastSeq) return; // already shown
        this.lastSeq = f.seq;
      }
      this.on.frame(f);
      if (f.type === "event" && f.event === "end") {
        this.ended = true;
        this.on.end(f);
      }
    };
    ws.onclose = () => {
      if (this.ws === ws) this.ws = null;
      if (!this.ended && !this.stopped) this.retry("connection lost; reconnecting");
    };
    ws.onerror = () => {};
  }

  retry(why) {
    if (this.stopped || this.ended) return;
    this.attempt++;
    const delay = Math.min(5000, 250 * 2 ** Math.min(this.attempt, 5));
    this.on.status(`${why} (in ${(delay / 1000).toFixed(1)} s)`);
    setTimeout(() => this.connect(), delay);
  }

  send(obj) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(obj));
      return true;
    }
    return false;
  }

  /* Drop the connection on purpose (tests and "simulate"); it comes back. */
  drop() {
    if (this.ws) this.ws.close();
  }

  stop() {
    this.stopped = true;
    if (this.ws) this.ws.close();
  }
}
