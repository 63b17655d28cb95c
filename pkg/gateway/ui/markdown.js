// Markdown of the model's answers, rendered as DOM nodes: headings,
// paragraphs (a line break is kept), emphasis, strikethrough, code spans,
// fenced and indented code blocks, lists, block quotes, rules and links.
// Model text only ever reaches the page through text nodes
// (createTextNode, textContent): HTML in an answer shows as the text it
// is, and a link is made only for an absolute http or https URL.
"use strict";

const renderMarkdown = (() => {
  const el = (tag, cls) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  };
  const blank = (l) => /^\s*$/.test(l);
  const indentOf = (l) => l.length - l.trimStart().length;

  const fenceRe = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$/;
  const headingRe = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const ruleRe = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const quoteRe = /^ {0,3}> ?(.*)$/;
  const itemRe = /^( {0,3})([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/;

  // starts says whether line opens a block that ends a paragraph.
  function starts(line) {
    if (fenceRe.test(line) || headingRe.test(line) || ruleRe.test(line) || quoteRe.test(line)) return true;
    const m = itemRe.exec(line);
    // An ordered list interrupts a paragraph only from 1, as CommonMark
    // has it: "2019. was a year" stays text.
    return !!m && m[4] !== undefined && m[4] !== "" && (!/\d/.test(m[2]) || parseInt(m[2], 10) === 1);
  }

  // blocks renders lines (tabs expanded) into parent.
  function blocks(lines, parent) {
    let para = [];
    const flush = () => {
      if (para.length) {
        const p = el("p");
        inline(para.map((l) => l.trim()).join("\n"), p, false);
        parent.append(p);
        para = [];
      }
    };
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (blank(line)) {
        flush();
        i++;
      } else if ((m = fenceRe.exec(line))) {
        flush();
        const close = new RegExp("^ {0,3}" + (m[1][0] === "`" ? "`" : "~") + "{" + m[1].length + ",}\\s*$");
        const body = [];
        // An unclosed fence (an answer still streaming) runs to the end.
        for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
        i++;
        const pre = el("pre");
        const code = el("code");
        const lang = m[2].replace(/[^\w+#.-]/g, "");
        if (lang) {
          code.className = "lang-" + lang.replace(/[^\w-]/g, "_");
          pre.dataset.lang = lang;
        }
        code.textContent = body.join("\n");
        pre.append(code);
        parent.append(pre);
      } else if (!para.length && indentOf(line) >= 4) {
        const body = [];
        while (i < lines.length && (indentOf(lines[i]) >= 4 || blank(lines[i]))) body.push(lines[i++].slice(4));
        while (body.length && blank(body[body.length - 1])) body.pop();
        const pre = el("pre");
        pre.append(el("code"));
        pre.firstChild.textContent = body.join("\n");
        parent.append(pre);
      } else if ((m = headingRe.exec(line))) {
        flush();
        const h = el("h" + m[1].length);
        inline(m[2] || "", h, false);
        parent.append(h);
        i++;
      } else if (ruleRe.test(line)) {
        flush();
        parent.append(el("hr"));
        i++;
      } else if ((m = quoteRe.exec(line))) {
        flush();
        const body = [];
        while (i < lines.length && !blank(lines[i])) {
          const q = quoteRe.exec(lines[i]);
          if (!q && starts(lines[i])) break;
          body.push(q ? q[1] : lines[i]);
          i++;
        }
        const bq = el("blockquote");
        blocks(body, bq);
        parent.append(bq);
      } else if ((m = itemRe.exec(line)) && (para.length === 0 || starts(line))) {
        flush();
        i = list(lines, i, parent);
      } else {
        para.push(line);
        i++;
      }
    }
    flush();
  }

  // list renders the list that starts at lines[i]; it returns the index
  // of the first line after it.
  function list(lines, i, parent) {
    const first = itemRe.exec(lines[i]);
    const ordered = /\d/.test(first[2]);
    const marker = ordered ? first[2].slice(-1) : first[2];
    const kind = (m) => m && (ordered ? /\d/.test(m[2]) && m[2].slice(-1) === marker : m[2] === marker);
    const ul = el(ordered ? "ol" : "ul");
    if (ordered && parseInt(first[2], 10) !== 1) ul.start = parseInt(first[2], 10);
    let m = first;
    while (m) {
      // The item's content lines: those indented to its text, and lazy
      // continuation lines of its paragraph.
      const pad = m[3] === undefined ? 1 : m[3].length > 4 ? 1 : m[3].length;
      const width = m[1].length + m[2].length + pad;
      const body = [m[3] !== undefined && m[3].length > 4 ? m[3].slice(1) + m[4] : m[4] || ""];
      for (i++; i < lines.length; i++) {
        const l = lines[i];
        if (blank(l)) {
          let j = i + 1;
          while (j < lines.length && blank(lines[j])) j++;
          if (j < lines.length && indentOf(lines[j]) >= width) {
            body.push("");
            continue;
          }
          break;
        }
        if (indentOf(l) >= width) body.push(l.slice(width));
        else if (itemRe.test(l) || starts(l) || blank(body[body.length - 1])) break;
        else body.push(l.trim());
      }
      const li = el("li");
      blocks(body, li);
      ul.append(li);
      // The next item of the same list, maybe after blank lines.
      let j = i;
      while (j < lines.length && blank(lines[j])) j++;
      m = j < lines.length ? itemRe.exec(lines[j]) : null;
      if (m && kind(m) && m[1].length < width) i = j;
      else m = null;
    }
    parent.append(ul);
    return i;
  }

  const punct = /[!-/:-@[-`{-~]/;
  const space = (c) => c === undefined || /\s/.test(c);
  const word = (c) => c !== undefined && /[\p{L}\p{N}_]/u.test(c);

  // safeURL is u as an absolute http(s) URL, or null.
  function safeURL(u) {
    u = u.trim().replace(/^<(.*)>$/, "$1");
    if (!/^https?:\/\//i.test(u)) return null;
    try {
      const url = new URL(u);
      return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
    } catch {
      return null;
    }
  }
  function link(href, parent) {
    const a = el("a");
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    parent.append(a);
    return a;
  }

  // closing finds the delimiter d closing an emphasis whose content starts
  // at from:
  // not after a space, and for "_" not before a letter; a single "*"/"_"
  // not next to another.
  // none remembers, per delimiter, a start from which nothing closes
  // (nothing closes from any later start either): many unclosed
  // delimiters cost one scan, not one each.
  function closing(s, from, d, none) {
    if (none[d] !== undefined && from >= none[d]) return -1;
    for (let k = from; k <= s.length - d.length; k++) {
      if (s[k] === "\\") {
        k++;
        continue;
      }
      if (s[k] === "`") {
        const n = run(s, k, "`");
        const end = codeEnd(s, k + n, n);
        if (end >= 0) k = end + n - 1;
        continue;
      }
      if (!s.startsWith(d, k) || space(s[k - 1])) continue;
      if (d[0] === "_" && word(s[k + d.length])) continue;
      if (d.length === 1 && (s[k + 1] === d || s[k - 1] === d)) continue;
      return k;
    }
    none[d] = from;
    return -1;
  }
  function run(s, i, c) {
    let n = 0;
    while (s[i + n] === c) n++;
    return n;
  }
  // codeEnd finds the backtick run of exactly n closing a code span.
  function codeEnd(s, from, n) {
    for (let k = from; k < s.length; k++) {
      if (s[k] !== "`") continue;
      const r = run(s, k, "`");
      if (r === n) return k;
      k += r - 1;
    }
    return -1;
  }
  // bracket finds the "]" closing the "[" at i.
  function bracket(s, i) {
    let depth = 0;
    // A link's text is short; the window bounds the scans of many "[".
    for (let k = i; k < Math.min(s.length, i + 1000); k++) {
      if (s[k] === "\\") k++;
      else if (s[k] === "[") depth++;
      else if (s[k] === "]" && --depth === 0) return k;
    }
    return -1;
  }
  // destination reads "(url "title")" at i: [url, end] or null.
  function destination(s, i) {
    if (s[i] !== "(") return null;
    let depth = 0;
    for (let k = i; k < Math.min(s.length, i + 2000); k++) {
      if (s[k] === "\\") k++;
      else if (s[k] === "(") depth++;
      else if (s[k] === ")" && --depth === 0) {
        const inner = s.slice(i + 1, k).trim();
        const m = /^(<[^>]*>|\S+)(?:\s+("[^"]*"|'[^']*'))?$/.exec(inner);
        return m ? [m[1], k + 1] : null;
      }
    }
    return null;
  }

  // inline renders the text of a paragraph or heading into parent; inLink
  // (a link's text) makes no links.
  function inline(s, parent, inLink) {
    const none = {};
    let buf = "";
    const text = () => {
      if (buf) parent.append(document.createTextNode(buf));
      buf = "";
    };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      if (c === "\\" && punct.test(s[i + 1] || "")) {
        buf += s[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        text();
        parent.append(el("br"));
        i++;
        continue;
      }
      if (c === "`") {
        const n = run(s, i, "`");
        const end = codeEnd(s, i + n, n);
        if (end < 0) {
          buf += s.slice(i, i + n);
          i += n;
          continue;
        }
        text();
        let t = s.slice(i + n, end).replace(/\n/g, " ");
        if (t.length >= 2 && t[0] === " " && t[t.length - 1] === " " && t.trim()) t = t.slice(1, -1);
        const code = el("code");
        code.textContent = t;
        parent.append(code);
        i = end + n;
        continue;
      }
      if (c === "*" || c === "_" || c === "~") {
        const n = run(s, i, c);
        const opens = !space(s[i + n]) && (c !== "_" || !word(s[i - 1]));
        let done = false;
        if (opens) {
          // The longest emphasis that closes: ***x*** is strong and
          // emphasis, **x** strong, *x* emphasis; ~~x~~ struck out. A
          // longer run's first delimiters stay text.
          const tries = c === "~" ? (n === 2 ? [["~~", ["del"]]] : []) : [
            [c.repeat(3), ["strong", "em"]],
            [c.repeat(2), ["strong"]],
            [c, ["em"]],
          ].filter(([d]) => d.length <= n);
          for (const [d, tags] of tries) {
            const from = i + n; // the content's first character
            const end = closing(s, from, d, none);
            if (end < 0 || end === from) continue;
            buf += s.slice(i, from - d.length);
            text();
            let host = parent;
            for (const tag of tags) host = host.appendChild(el(tag));
            inline(s.slice(from, end), host, inLink);
            i = end + d.length;
            done = true;
            break;
          }
        }
        if (!done) {
          buf += s.slice(i, i + n);
          i += n;
        }
        continue;
      }
      if (!inLink && (c === "[" || (c === "!" && s[i + 1] === "["))) {
        const open = c === "!" ? i + 1 : i;
        const close = bracket(s, open);
        const dest = close >= 0 ? destination(s, close + 1) : null;
        if (dest) {
          const href = safeURL(dest[0]);
          text();
          if (href) {
            // An image is linked, not loaded: the page fetches nothing a
            // model names.
            const a = link(href, parent);
            if (close > open + 1) inline(s.slice(open + 1, close), a, true);
            else a.textContent = dest[0];
          } else {
            buf = s.slice(i, dest[1]);
          }
          i = dest[1];
          continue;
        }
      }
      if (c === "<" && !inLink) {
        const m = /^<(https?:\/\/[^\s<>]+)>/i.exec(s.slice(i));
        const href = m && safeURL(m[1]);
        if (href) {
          text();
          link(href, parent).textContent = m[1];
          i += m[0].length;
          continue;
        }
      }
      if ((c === "h" || c === "H") && !inLink && !word(s[i - 1])) {
        const m = /^https?:\/\/[^\s<>]+/i.exec(s.slice(i));
        if (m) {
          let u = m[0].replace(/[.,:;!?'"*_~]+$/, "");
          while (u.endsWith(")") && (u.match(/\(/g) || []).length < (u.match(/\)/g) || []).length) u = u.slice(0, -1);
          const href = safeURL(u);
          if (href) {
            text();
            link(href, parent).textContent = u;
            i += u.length;
            continue;
          }
        }
      }
      buf += c;
      i++;
    }
    text();
  }

  return function renderMarkdown(src) {
    const frag = document.createDocumentFragment();
    const lines = String(src)
      .replace(/\r\n?/g, "\n")
      .split("\n")
      .map((l) => l.replace(/^\t+/, (t) => "    ".repeat(t.length)));
    blocks(lines, frag);
    return frag;
  };
})();
