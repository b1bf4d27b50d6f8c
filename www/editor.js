/* editor.js: a small code editor — a textarea over a highlighted copy of
 * its text, a line-number gutter, Tab to indent (Esc then Tab leaves, so
 * keyboard users are never trapped). No dependency. */
"use strict";

const Editor = (() => {
  const KEYWORDS = {
    python: "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield None True False print",
    javascript: "async await break case catch class const continue default delete do else export extends finally for function if import in instanceof let new of return switch throw try typeof var void while yield null undefined true false console require",
    shell: "if then else elif fi for while until do done case esac function in echo exit return export local read set unset cd printf test",
  };
  const COMMENT = { python: "#", javascript: "//", shell: "#" };
  let lang = "python", ta, hl, gutter, escaped = false;

  function esc(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function highlight(src) {
    const kw = new Set(KEYWORDS[lang].split(" "));
    const c = COMMENT[lang];
    let out = "", i = 0;
    while (i < src.length) {
      const ch = src[i];
      if (src.startsWith(c, i)) {
        const end = src.indexOf("\n", i);
        const j = end < 0 ? src.length : end;
        out += `<span class="tok-com">${esc(src.slice(i, j))}</span>`;
        i = j;
      } else if (ch === '"' || ch === "'" || (ch === "`" && lang === "javascript")) {
        let j = i + 1;
        while (j < src.length && src[j] !== ch && src[j] !== "\n") j += src[j] === "\\" ? 2 : 1;
        j = Math.min(j + 1, src.length);
        out += `<span class="tok-str">${esc(src.slice(i, j))}</span>`;
        i = j;
      } else if (/[0-9]/.test(ch) && (i === 0 || !/[\w]/.test(src[i - 1]))) {
        const m = /^[0-9][0-9_.xXa-fA-F]*/.exec(src.slice(i));
        out += `<span class="tok-num">${esc(m[0])}</span>`;
        i += m[0].length;
      } else if (/[A-Za-z_]/.test(ch)) {
        const m = /^[A-Za-z_][\w]*/.exec(src.slice(i));
        const w = m[0];
        const next = src[i + w.length];
        if (kw.has(w)) out += `<span class="tok-kw">${w}</span>`;
        else if (next === "(") out += `<span class="tok-fn">${w}</span>`;
        else out += w;
        i += w.length;
      } else {
        out += esc(ch);
        i++;
      }
    }
    return out + "\n";
  }

  function refresh() {
    hl.innerHTML = highlight(ta.value);
    const lines = ta.value.split("\n").length;
    let g = "";
    for (let n = 1; n <= lines; n++) g += n + "\n";
    gutter.textContent = g;
    // The textarea sizes the box: as tall and wide as its text.
    ta.style.height = "0";
    ta.style.height = Math.max(ta.scrollHeight, hl.parentNode.scrollHeight) + "px";
    ta.parentNode.style.minHeight = ta.style.height;
    ta.parentNode.style.minWidth = hl.parentNode.scrollWidth + "px";
  }

  function onKey(e) {
    if (e.key === "Escape") { escaped = true; return; }
    if (e.key === "Tab" && !escaped && !e.ctrlKey && !e.altKey && !e.metaKey) {
      e.preventDefault();
      const s = ta.selectionStart, v = ta.value;
      if (e.shiftKey) {
        const ls = v.lastIndexOf("\n", s - 1) + 1;
        if (v.startsWith("    ", ls)) {
          ta.value = v.slice(0, ls) + v.slice(ls + 4);
          ta.selectionStart = ta.selectionEnd = Math.max(ls, s - 4);
        }
      } else {
        ta.value = v.slice(0, s) + "    " + v.slice(ta.selectionEnd);
        ta.selectionStart = ta.selectionEnd = s + 4;
      }
      refresh();
      return;
    }
    escaped = false;
  }

  return {
    init(textarea, highlightEl, gutterEl) {
      ta = textarea; hl = highlightEl; gutter = gutterEl;
      ta.addEventListener("input", refresh);
      ta.addEventListener("keydown", onKey);
      refresh();
    },
    setLanguage(l) { lang = KEYWORDS[l] ? l : "shell"; refresh(); },
    get value() { return ta.value; },
    set value(v) { ta.value = v; refresh(); },
  };
})();
