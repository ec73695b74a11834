// gosling's Markdown renderer: text in, DOM nodes out. It never builds HTML strings, so model,
// tool or server text can only ever become text nodes; raw HTML in the input shows as text.
// Links keep only http(s) URLs. Every scan moves forward (closers are searched once and
// remembered) and nesting is capped, so time stays linear in the input, fenced or not.
"use strict";
(function (root) {
  const MAX_DEPTH = 6;
  const h = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  function safeUrl(u) {
    try {
      const url = new URL(u.trim());
      if ((url.protocol === "http:" || url.protocol === "https:") && /^https?:/i.test(u.trim())) return url.href;
    } catch (_) { /* not a URL */ }
    return null;
  }

  function link(label, href) {
    const safe = safeUrl(href);
    if (!safe) return null;
    const a = h("a");
    a.href = safe;
    a.rel = "noopener noreferrer";
    a.target = "_blank";
    a.append(label);
    return a;
  }

  // ---------- inline ----------
  function inline(src, depth) {
    const frag = document.createDocumentFragment();
    const memo = new Map(); // closer -> index found from an earlier (smaller) start, or -1
    const find = (s, from) => {
      const m = memo.get(s);
      if (m !== undefined && (m === -1 || m >= from)) return m;
      const r = src.indexOf(s, from);
      memo.set(s, r);
      return r;
    };
    let text = "";
    const flush = () => { if (text) { frag.append(text); text = ""; } };
    const deep = depth >= MAX_DEPTH;
    let i = 0;
    const n = src.length;
    while (i < n) {
      const c = src[i];
      if (c === "\\" && i + 1 < n) {
        if (src[i + 1] === "\n") { flush(); frag.append(h("br")); i += 2; continue; }
        if (/[!-/:-@[-`{-~]/.test(src[i + 1])) { text += src[i + 1]; i += 2; continue; }
      }
      if (c === "\n" && text.endsWith("  ")) { text = text.replace(/ +$/, ""); flush(); frag.append(h("br")); i += 1; continue; }
      if (c === "`") {
        let k = i;
        while (k < n && src[k] === "`") k += 1;
        const run = src.slice(i, k);
        const end = run.length <= 16 ? find(run, k) : -1;
        if (end >= 0) {
          flush();
          let code = src.slice(k, end).replace(/\n/g, " ");
          if (code.length > 2 && code[0] === " " && code[code.length - 1] === " ") code = code.slice(1, -1);
          frag.append(h("code", null, code));
          i = end + run.length;
          continue;
        }
        text += run; i = k; continue;
      }
      if (!deep && (c === "*" || c === "_")) {
        const dbl = src[i + 1] === c;
        const mark = dbl ? c + c : c;
        const start = i + mark.length;
        if (start < n && src[start] !== " " && src[start] !== "\n" && (c === "*" || i === 0 || !/\w/.test(src[i - 1]))) {
          let end = find(mark, start + 1);
          // a single mark must not be the first half of a double one
          while (!dbl && end >= 0 && src[end + 1] === c) { end = src.indexOf(mark, end + 2); memo.set(mark, end); }
          if (end > start && src[end - 1] !== " " && (c === "*" || end + mark.length >= n || !/\w/.test(src[end + mark.length]))) {
            flush();
            const e = h(dbl ? "strong" : "em");
            e.append(inline(src.slice(start, end), depth + 1));
            frag.append(e);
            i = end + mark.length;
            continue;
          }
        }
      }
      if (!deep && c === "~" && src[i + 1] === "~") {
        const end = find("~~", i + 2);
        if (end > i + 2) {
          flush();
          const e = h("del");
          e.append(inline(src.slice(i + 2, end), depth + 1));
          frag.append(e);
          i = end + 2;
          continue;
        }
      }
      if (c === "[" || (c === "!" && src[i + 1] === "[")) {
        const open = c === "!" ? i + 1 : i;
        const close = find("]", open + 1);
        if (close > open && src[close + 1] === "(") {
          const paren = find(")", close + 2);
          if (paren > close) {
            const label = src.slice(open + 1, close);
            const href = src.slice(close + 2, paren).trim().split(/\s+/)[0] || "";
            const inner = deep ? document.createTextNode(label) : inline(label, depth + 1);
            const a = link(inner, href);
            flush();
            if (a) frag.append(a);
            else frag.append(src.slice(i, paren + 1)); // unsafe scheme: shown as the text it was
            i = paren + 1;
            continue;
          }
        }
      }
      if ((c === "h" || c === "H") && (i === 0 || /[\s(]/.test(src[i - 1])) && /^https?:\/\//i.test(src.slice(i, i + 8))) {
        let k = i;
        while (k < n && !/[\s<>"]/.test(src[k])) k += 1;
        while (k > i && /[.,;:!?)]/.test(src[k - 1])) k -= 1;
        const url = src.slice(i, k);
        const a = link(url, url);
        if (a) { flush(); frag.append(a); i = k; continue; }
      }
      text += c;
      i += 1;
    }
    flush();
    return frag;
  }

  // ---------- blocks ----------
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
  const LIST = /^( {0,12})([-*+]|\d{1,9}[.)])(?:[ \t]+|$)/;
  const isBlank = (l) => l.trim() === "";
  function isRule(l) {
    const t = l.replace(/[ \t]/g, "");
    return t.length >= 3 && t.length <= 200 && /^(-+|\*+|_+)$/.test(t) && l.search(/\S/) < 4;
  }
  function heading(l) {
    const m = /^ {0,3}(#{1,6})(?:[ \t]|$)/.exec(l);
    if (!m) return null;
    let t = l.slice(m[0].length).trim();
    let k = t.length;
    while (k > 0 && t[k - 1] === "#") k -= 1;
    if (k === 0 || t[k - 1] === " ") t = t.slice(0, k).trim();
    return { level: m[1].length, text: t };
  }
  function cells(l) {
    let t = l.trim();
    if (t.startsWith("|")) t = t.slice(1);
    if (t.endsWith("|") && !t.endsWith("\\|")) t = t.slice(0, -1);
    const out = [];
    let cur = "";
    for (let i = 0; i < t.length; i++) {
      if (t[i] === "\\" && t[i + 1] === "|") { cur += "|"; i += 1; } else if (t[i] === "|") { out.push(cur.trim()); cur = ""; } else cur += t[i];
    }
    out.push(cur.trim());
    return out;
  }
  function delimRow(l) {
    if (!l.includes("-") || l.length > 10000) return null;
    const cs = cells(l);
    if (!cs.every((c) => /^:?-+:?$/.test(c))) return null;
    return cs.map((c) => c.endsWith(":") ? (c.startsWith(":") ? "center" : "right") : (c.startsWith(":") ? "left" : ""));
  }
  const startsBlock = (l, next) => FENCE.test(l) || heading(l) || isRule(l) || /^ {0,3}>/.test(l) || LIST.test(l)
    || (l.includes("|") && next !== undefined && delimRow(next));

  // A small highlighter for the common languages: one forward scan marking comments, strings,
  // numbers and keywords as spans of text (classes tk-c, tk-s, tk-n, tk-k; colours in
  // style.css, light and dark). Anything else stays plain text; so does a block over MAX_HL.
  const MAX_HL = 200000;
  const kw = (s) => new Set(s.split(" "));
  const C_LIKE = { line: "//", block: true, quotes: "\"'" };
  const LANGS = {
    js: Object.assign({ quotes: "\"'`", kw: kw("async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield interface type enum implements private public readonly as") }, { line: "//", block: true }),
    py: { line: "#", quotes: "\"'", kw: kw("and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield match case") },
    rs: Object.assign({ kw: kw("as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok Err") }, C_LIKE, { quotes: "\"" }),
    sh: { line: "#", quotes: "\"'", kw: kw("if then else elif fi for while until do done case esac in function return export local set unset echo exit cd") },
    json: { quotes: "\"", kw: kw("true false null") },
    go: Object.assign({ kw: kw("break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false") }, C_LIKE, { quotes: "\"'`" }),
    c: Object.assign({ kw: kw("auto break case char class const continue default delete do double else enum extern false float for goto if inline int long namespace new nullptr private protected public return short signed sizeof static struct switch template this throw true try typedef union unsigned using virtual void volatile while bool boolean final import package String var val fun override") }, C_LIKE),
  };
  const ALIAS = { javascript: "js", jsx: "js", ts: "js", tsx: "js", typescript: "js", mjs: "js", python: "py", py3: "py",
    rust: "rs", bash: "sh", shell: "sh", zsh: "sh", console: "sh", golang: "go", cpp: "c", "c++": "c", h: "c", hpp: "c",
    java: "c", cs: "c", csharp: "c", kotlin: "c", swift: "c", jsonc: "json" };
  function highlight(code, lang) {
    const key = String(lang || "").toLowerCase();
    const L = LANGS[ALIAS[key] || key];
    if (!L || code.length > MAX_HL) return null;
    const frag = document.createDocumentFragment();
    const n = code.length;
    let plain = 0;
    const put = (start, end, cls) => {
      if (start > plain) frag.append(code.slice(plain, start));
      frag.append(h("span", cls, code.slice(start, end)));
      plain = end;
    };
    const word = /[A-Za-z_$][\w$]*/y;
    const num = /(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[a-zA-Z\d_]*/y;
    let i = 0;
    while (i < n) {
      const c = code[i];
      if (L.line && code.startsWith(L.line, i)) {
        let e = code.indexOf("\n", i);
        if (e < 0) e = n;
        put(i, e, "tk-c"); i = e; continue;
      }
      if (L.block && c === "/" && code[i + 1] === "*") {
        let e = code.indexOf("*/", i + 2);
        e = e < 0 ? n : e + 2;
        put(i, e, "tk-c"); i = e; continue;
      }
      if (L.quotes.includes(c)) {
        let e = i + 1;
        while (e < n && code[e] !== c && (c === "`" || code[e] !== "\n")) e += code[e] === "\\" ? 2 : 1;
        e = Math.min(n, e + 1);
        put(i, e, "tk-s"); i = e; continue;
      }
      if (/[A-Za-z_$]/.test(c) && !(i > 0 && /[\w$]/.test(code[i - 1]))) {
        word.lastIndex = i;
        const w = word.exec(code)[0];
        if (L.kw.has(w)) put(i, i + w.length, "tk-k");
        i += w.length; continue;
      }
      if (/\d/.test(c) && !(i > 0 && /[\w$.]/.test(code[i - 1]))) {
        num.lastIndex = i;
        const m = num.exec(code)[0];
        put(i, i + m.length, "tk-n"); i += m.length; continue;
      }
      i += 1;
    }
    if (plain < n) frag.append(code.slice(plain));
    return frag;
  }

  function codeBlock(code, lang) {
    const wrap = h("div", "code");
    const bar = h("div", "code-bar");
    bar.append(h("span", "lang", lang || "text"));
    const btn = h("button", "copy", "Copy");
    btn.type = "button";
    btn.setAttribute("aria-label", "Copy code" + (lang ? " (" + lang + ")" : ""));
    btn.addEventListener("click", () => {
      const done = (ok) => { btn.textContent = ok ? "Copied" : "Copy failed"; setTimeout(() => { btn.textContent = "Copy"; }, 1500); };
      if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(code).then(() => done(true), () => done(false));
      else done(false);
    });
    bar.append(btn);
    const pre = h("pre");
    const codeEl = h("code", lang ? "language-" + lang.replace(/[^\w-]/g, "") : null);
    const lit = highlight(code, lang);
    if (lit) { codeEl.append(lit); codeEl.classList.add("hl"); } else codeEl.textContent = code;
    pre.append(codeEl);
    wrap.append(bar, pre);
    return wrap;
  }

  function blocks(lines, depth, out) {
    let i = 0;
    const n = lines.length;
    while (i < n) {
      const l = lines[i];
      if (isBlank(l)) { i += 1; continue; }
      const f = FENCE.exec(l);
      if (f) {
        const ch = f[1][0];
        const len = f[1].length;
        const body = [];
        i += 1;
        while (i < n) {
          const t = lines[i].trim();
          if (t.length >= len && t[0] === ch && t.split(ch).join("") === "" && lines[i].search(/\S/) < 4) { i += 1; break; }
          body.push(lines[i]);
          i += 1;
        }
        out.append(codeBlock(body.join("\n"), f[2]));
        continue;
      }
      const hd = heading(l);
      if (hd) {
        const e = h("h" + Math.min(6, hd.level + 2));
        e.append(inline(hd.text, depth));
        out.append(e);
        i += 1;
        continue;
      }
      if (isRule(l)) { out.append(h("hr")); i += 1; continue; }
      if (/^ {0,3}>/.test(l)) {
        const inner = [];
        while (i < n && !isBlank(lines[i]) && (/^ {0,3}>/.test(lines[i]) || !startsBlock(lines[i], lines[i + 1]))) {
          inner.push(lines[i].replace(/^ {0,3}> ?/, ""));
          i += 1;
        }
        const q = h("blockquote");
        if (depth >= MAX_DEPTH) q.textContent = inner.join("\n");
        else blocks(inner, depth + 1, q);
        out.append(q);
        continue;
      }
      const li = LIST.exec(l);
      if (li) {
        const ordered = /\d/.test(li[2]);
        const list = h(ordered ? "ol" : "ul");
        if (ordered && parseInt(li[2], 10) !== 1) list.start = parseInt(li[2], 10);
        const base = li[1].length;
        while (i < n) {
          const m = LIST.exec(lines[i]);
          if (!m || m[1].length !== base || /\d/.test(m[2]) !== ordered) break;
          const indent = m[0].length;
          const item = [lines[i].slice(indent)];
          i += 1;
          let sawBlank = false;
          while (i < n) {
            const t = lines[i];
            if (isBlank(t)) { sawBlank = true; item.push(""); i += 1; continue; }
            const lead = t.search(/\S/);
            if (lead >= indent || (lead > base && LIST.test(t))) { item.push(t.slice(Math.min(lead, indent))); sawBlank = false; i += 1; continue; }
            if (!sawBlank && !startsBlock(t, lines[i + 1]) && !LIST.test(t)) { item.push(t); i += 1; continue; }
            break;
          }
          while (item.length && isBlank(item[item.length - 1])) item.pop();
          const e = h("li");
          if (depth >= MAX_DEPTH) e.textContent = item.join("\n");
          else if (item.length === 1) e.append(inline(item[0], depth + 1));
          else blocks(item, depth + 1, e);
          list.append(e);
          if (sawBlank && i < n && !LIST.test(lines[i])) break;
        }
        out.append(list);
        continue;
      }
      if (l.includes("|") && i + 1 < n) {
        const align = delimRow(lines[i + 1]);
        if (align) {
          const wrap = h("div", "table");
          const table = h("table");
          const head = h("thead");
          const tr = h("tr");
          cells(l).forEach((c, k) => {
            const th = h("th");
            th.scope = "col";
            if (align[k]) th.style.textAlign = align[k];
            th.append(inline(c, depth + 1));
            tr.append(th);
          });
          head.append(tr);
          table.append(head);
          const body = h("tbody");
          i += 2;
          while (i < n && !isBlank(lines[i]) && lines[i].includes("|")) {
            const row = h("tr");
            const cs = cells(lines[i]);
            for (let k = 0; k < align.length; k++) {
              const td = h("td");
              if (align[k]) td.style.textAlign = align[k];
              td.append(inline(cs[k] || "", depth + 1));
              row.append(td);
            }
            body.append(row);
            i += 1;
          }
          table.append(body);
          wrap.append(table);
          out.append(wrap);
          continue;
        }
      }
      const para = [l];
      i += 1;
      while (i < n && !isBlank(lines[i]) && !startsBlock(lines[i], lines[i + 1])) { para.push(lines[i]); i += 1; }
      const p = h("p");
      p.append(inline(para.join("\n"), depth));
      out.append(p);
    }
    return out;
  }

  /** Renders Markdown `src` to a DocumentFragment of DOM nodes (never HTML). */
  function render(src) {
    const frag = document.createDocumentFragment();
    blocks(String(src).replace(/\r\n?/g, "\n").split("\n"), 0, frag);
    return frag;
  }
  root.goslingMarkdown = { render, safeUrl, highlight };
})(typeof window !== "undefined" ? window : globalThis);
