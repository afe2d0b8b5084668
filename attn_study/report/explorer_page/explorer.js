// The instance explorer (attn_study/report/explorer.py writes the data this reads; no network, no libraries).
// Rows are drawn lazily (only those in view), an instance's text only when it is selected, and each copy of it
// D.chunk tokens at a time (more on request), so that a text of any length shows at once.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("explorer-data").textContent);
  const $ = (id) => document.getElementById(id);
  const ROW = 24; // px: tbody tr.row's height in explorer.css
  const SPARE = 12; // rows drawn above and below the visible ones

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  $("about").textContent = D.about || "";
  if (D.differ) {
    const differ = $("differ");
    differ.textContent = D.differ;
    differ.hidden = false;
  }
  if (D.nothing) {
    const nothing = $("nothing");
    nothing.textContent = D.nothing;
    nothing.hidden = false;
    return;
  }
  $("explorer").hidden = false;

  // ---- columns: values as numbers for sorting and filtering (NaN: missing) --------------------------------
  const N = D.n;
  const columns = D.columns.map(function (c) {
    const col = Object.assign({}, c);
    if (c.type === "text") {
      col.text = c.values.map((v) => (v === null ? null : String(v)));
      col.num = null;
    } else {
      col.num = new Float64Array(N);
      for (let i = 0; i < N; i++) {
        const v = c.values[i];
        col.num[i] = v === null ? NaN : c.type === "bool" ? (v ? 1 : 0) : Number(v);
      }
    }
    col.filter = null;
    return col;
  });
  const byKey = {};
  columns.forEach((c) => (byKey[c.key] = c));

  function display(col, i) {
    const v = col.values[i];
    if (v === null || v === undefined) return "—";
    if (col.type === "bool") return v ? "✓" : "✗";
    if (col.type === "class") return col.names && v >= 0 && v < col.names.length ? col.names[v] : "class " + v;
    return String(v);
  }

  // ---- filters --------------------------------------------------------------------------------------------
  function numberFilter(text) {
    // a predicate on a number (NaN: missing), null for no filter, undefined when the text does not parse
    const t = text.trim().toLowerCase();
    if (t === "") return null;
    if (t === "nan" || t === "missing") return (x) => Number.isNaN(x);
    let m = t.match(/^(-?[\d.e+-]+)\s*\.\.\s*(-?[\d.e+-]+)$/);
    if (m) {
      const lo = Number(m[1]), hi = Number(m[2]);
      if (Number.isNaN(lo) || Number.isNaN(hi)) return undefined;
      return (x) => x >= lo && x <= hi;
    }
    m = t.match(/^(>=|<=|!=|>|<|=)?\s*(-?[\d.e+-]+)$/);
    if (!m) return undefined;
    const y = Number(m[2]);
    if (Number.isNaN(y)) return undefined;
    switch (m[1] || "=") {
      case ">": return (x) => x > y;
      case ">=": return (x) => x >= y;
      case "<": return (x) => x < y;
      case "<=": return (x) => x <= y;
      case "!=": return (x) => !Number.isNaN(x) && x !== y;
      default: return (x) => x === y;
    }
  }

  function passes(i) {
    for (const col of columns) {
      if (!col.filter) continue;
      if (col.type === "text") {
        const v = col.text[i];
        if (v === null || v.toLowerCase().indexOf(col.filter) < 0) return false;
      } else if (!col.filter(col.num[i])) return false;
    }
    return true;
  }

  // ---- sorting: missing values last in either direction, ties in split order --------------------------------
  let sortKey = null, sortDesc = false;
  let order = new Int32Array(0);

  function refresh() {
    const kept = [];
    for (let i = 0; i < N; i++) if (passes(i)) kept.push(i);
    order = Int32Array.from(kept);
    if (sortKey !== null) {
      const col = byKey[sortKey], sign = sortDesc ? -1 : 1;
      if (col.type === "text") {
        const t = col.text;
        order.sort(function (a, b) {
          if (t[a] === null || t[b] === null) return t[a] === t[b] ? a - b : t[a] === null ? 1 : -1;
          return sign * t[a].localeCompare(t[b]) || a - b;
        });
      } else {
        const x = col.num;
        order.sort(function (a, b) {
          const na = Number.isNaN(x[a]), nb = Number.isNaN(x[b]);
          if (na || nb) return na === nb ? a - b : na ? 1 : -1;
          return x[a] === x[b] ? a - b : sign * (x[a] - x[b]);
        });
      }
    }
    $("count").textContent = order.length + " of " + N + " instances";
    wrap.scrollTop = 0;
    drawRows(true);
  }

  // ---- the table ------------------------------------------------------------------------------------------
  const wrap = $("table-wrap");
  const table = $("instances");
  const tbody = table.tBodies[0];
  let shown = [];
  let selected = -1;
  let drawn = [-1, -1];

  function visibleColumns() {
    return columns.filter((c) => c.visible);
  }

  function header() {
    const thead = table.tHead;
    thead.textContent = "";
    const names = el("tr", "names"), filters = el("tr", "filters");
    for (const col of shown) {
      const th = el("th");
      th.dataset.key = col.key;
      th.title = (col.group ? col.group + " · " : "") + (col.column || col.name) + (col.main ? " (★ sorts the most disagreeing first: " + (col.main === "low" ? "ascending" : "descending") + ")" : "");
      if (col.main) th.classList.add("main");
      if (sortKey === col.key) th.classList.add("sorted", ...(sortDesc ? ["desc"] : []));
      th.appendChild(el("span", "group", col.group || "\u00a0"));
      th.appendChild(el("span", "name", col.name));
      th.addEventListener("click", function () {
        if (sortKey === col.key) sortDesc = !sortDesc;
        else { sortKey = col.key; sortDesc = col.main === "high"; } // a ★ column: the most disagreeing first
        header();
        refresh();
      });
      names.appendChild(th);
      const cell = el("th");
      cell.appendChild(filterControl(col));
      filters.appendChild(cell);
    }
    thead.appendChild(names);
    thead.appendChild(filters);
  }

  function filterControl(col) {
    let control;
    if (col.type === "bool" || col.type === "class") {
      control = el("select");
      const choices = [["", "all"]];
      if (col.type === "bool") choices.push(["1", "✓ true"], ["0", "✗ false"]);
      else (col.names || []).forEach((name, k) => choices.push([String(k), name]));
      choices.push(["nan", "— missing"]);
      for (const [value, label] of choices) {
        const option = el("option", null, label);
        option.value = value;
        control.appendChild(option);
      }
      control.value = col.choice || "";
      control.addEventListener("change", function () {
        col.choice = control.value;
        const v = control.value;
        col.filter = v === "" ? null : v === "nan" ? (x) => Number.isNaN(x) : ((y) => (x) => x === y)(Number(v));
        refresh();
      });
    } else {
      control = el("input");
      control.type = "text";
      control.placeholder = col.type === "text" ? "contains" : "filter";
      control.value = col.typed || "";
      control.addEventListener("input", function () {
        col.typed = control.value;
        if (col.type === "text") col.filter = control.value.trim() ? control.value.trim().toLowerCase() : null;
        else {
          const f = numberFilter(control.value);
          control.classList.toggle("bad", f === undefined);
          col.filter = f === undefined ? null : f;
        }
        refresh();
      });
    }
    control.dataset.key = col.key;
    control.addEventListener("click", (event) => event.stopPropagation());
    return control;
  }

  function pieces(parent, words) {
    // words as spans of their own, each isolated (explorer.css): a right-to-left override in one never reorders the others
    words.forEach(function (word, k) {
      if (k) parent.appendChild(document.createTextNode(" "));
      parent.appendChild(el("span", "piece", word));
    });
  }

  function spacer(height) {
    const tr = el("tr", "spacer");
    tr.style.height = height + "px";
    return tr;
  }

  function drawRows(force) {
    const first = Math.max(0, Math.floor(wrap.scrollTop / ROW) - SPARE);
    const last = Math.min(order.length, Math.ceil((wrap.scrollTop + wrap.clientHeight) / ROW) + SPARE);
    if (!force && first === drawn[0] && last === drawn[1]) return;
    drawn = [first, last];
    const rows = document.createDocumentFragment();
    rows.appendChild(spacer(first * ROW));
    for (let k = first; k < last; k++) {
      const i = order[k];
      const tr = el("tr", "row" + (i === selected ? " selected" : ""));
      tr.dataset.row = i;
      tr.dataset.uid = D.uids[i];
      for (const col of shown) {
        const v = col.values[i];
        const td = el("td", (col.type === "number" ? "number" : "") + (v === null ? " missing" : ""));
        if (col.tokens && v !== null) pieces(td, v.split(" "));
        else td.textContent = display(col, i);
        td.dataset.key = col.key;
        tr.appendChild(td);
      }
      rows.appendChild(tr);
    }
    rows.appendChild(spacer((order.length - last) * ROW));
    tbody.textContent = "";
    tbody.appendChild(rows);
  }

  let pending = false;
  wrap.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      drawRows(false);
    });
  });
  tbody.addEventListener("click", function (event) {
    const tr = event.target.closest("tr.row");
    if (tr) select(Number(tr.dataset.row));
  });
  wrap.addEventListener("keydown", function (event) {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    event.preventDefault();
    const at = order.indexOf(selected);
    const next = Math.min(order.length - 1, Math.max(0, at + (event.key === "ArrowDown" ? 1 : -1)));
    if (order.length) {
      select(order[next]);
      const top = next * ROW;
      if (top < wrap.scrollTop + 2 * ROW || top > wrap.scrollTop + wrap.clientHeight - 3 * ROW) {
        wrap.scrollTop = Math.max(0, top - wrap.clientHeight / 2);
      }
    }
  });
  $("reset").addEventListener("click", function () {
    columns.forEach(function (c) {
      c.filter = null;
      c.choice = "";
      c.typed = "";
    });
    header();
    refresh();
  });

  // ---- the column chooser ---------------------------------------------------------------------------------
  function chooser() {
    const list = $("column-list");
    const groups = new Map();
    for (const col of columns) {
      const g = col.group || "instance";
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(col);
    }
    for (const [group, cols] of groups) {
      const set = el("fieldset");
      const legend = el("legend", null, group + " ");
      for (const [label, on] of [["all", true], ["none", false]]) {
        const button = el("button", null, label);
        button.type = "button";
        button.addEventListener("click", function () {
          cols.forEach((c) => (c.visible = on || c.key === "uid"));
          set.querySelectorAll("input").forEach((box) => (box.checked = byKey[box.dataset.key].visible));
          reshape();
        });
        legend.appendChild(button);
      }
      set.appendChild(legend);
      for (const col of cols) {
        const label = el("label");
        const box = el("input");
        box.type = "checkbox";
        box.checked = col.visible;
        box.dataset.key = col.key;
        box.addEventListener("change", function () {
          col.visible = box.checked;
          reshape();
        });
        label.appendChild(box);
        const said = col.column && col.column !== col.name ? col.name + " (" + col.column + ")" : col.name;
        label.appendChild(document.createTextNode(" " + said + (col.main ? " ★" : "") + (col.note ? " — " + noted(col) : "")));
        set.appendChild(label);
      }
      list.appendChild(set);
    }
  }

  function noted(col) {
    // "empty", or "constant: <its one value>"
    if (col.note !== "constant") return col.note;
    const at = col.values.findIndex((v) => v !== null);
    return "constant: " + display(col, at);
  }

  function reshape() {
    shown = visibleColumns();
    header();
    drawRows(true);
  }

  // ---- one instance: its text once per method, coloured on that method's scale -----------------------------
  function bytes(b64) {
    const s = atob(b64);
    const out = new Uint8Array(s.length);
    for (let k = 0; k < s.length; k++) out[k] = s.charCodeAt(k);
    return out;
  }

  function ids(encoded, i) {
    // row i's token ids (into D.vocab), null where it has none
    if (!encoded || encoded[i] === null) return null;
    const raw = bytes(encoded[i]);
    return D.width === 2 ? new Uint16Array(raw.buffer) : new Uint32Array(raw.buffer);
  }

  function colour(shade) {
    if (Number.isNaN(shade)) return "transparent";
    const rgb = shade >= 0 ? D.scale.positive : D.scale.negative;
    return "rgba(" + rgb[0] + ", " + rgb[1] + ", " + rgb[2] + ", " + Math.abs(shade).toFixed(3) + ")";
  }

  function number(x) {
    return Number.isFinite(x) ? Number(x.toPrecision(3)).toString() : "n/a";
  }

  // ---- word pieces (encoder=pretrained): each word drawn once, its score read off its pieces' -----------------
  // by the rule chosen above the table (D.word_rules: data/pieces.py), its pieces and score on hover
  let wordRule = D.word_rules ? D.word_rules[0] : "pieces";
  if (D.word_rules) {
    const control = $("word-rule");
    for (const rule of D.word_rules.concat(["pieces"])) {
      const option = el("option", null, rule === "pieces" ? "word pieces" : "words (" + rule + " of their pieces)");
      option.value = rule;
      control.appendChild(option);
    }
    control.value = wordRule;
    $("word-view").hidden = false;
    control.addEventListener("change", function () {
      wordRule = control.value;
      if (selected >= 0) select(selected);
    });
  }

  function wordScore(values, rule) {
    // data/pieces.py's word_scores: sum; max, the piece of largest magnitude with its sign; first (NaN as there)
    if (rule === "first") return values[0];
    if (values.some(Number.isNaN)) return NaN;
    if (rule === "sum") return values.reduce((a, b) => a + b, 0);
    return values.reduce((a, b) => (Math.abs(b) > Math.abs(a) ? b : a));
  }

  function wordsOf(i) {
    // row i's words, each {label, pieces: positions in the text}, or null to draw its pieces
    if (wordRule === "pieces" || !D.words || D.words[i] === null) return null;
    const raw = bytes(D.words[i]);
    const word = new Uint16Array(raw.buffer);
    const named = ids(D.word_texts, i);
    const out = [];
    word.forEach(function (w, t) {
      if (!out[w]) out[w] = { label: D.vocab[named[w]], pieces: [] };
      out[w].pieces.push(t);
    });
    return out;
  }

  function drawnItems(q, top, text, i) {
    // what a copy draws — its pieces, or its words — each {label, shade, title}, and its full-colour |score|
    const piece = (t) => (q[t] === -128 ? NaN : (q[t] / D.levels) * top);
    const words = wordsOf(i);
    if (words === null) {
      const items = Array.from(text, (id, t) => ({ label: D.vocab[id], score: piece(t), title: null }));
      return { items: items, top: top };
    }
    const items = words.map(function (w) {
      const names = w.pieces.map((t) => D.vocab[text[t]]).join(" ");
      return { label: w.label, score: wordScore(w.pieces.map(piece), wordRule), title: names };
    });
    const finite = items.map((it) => Math.abs(it.score)).filter(Number.isFinite);
    return { items: items, top: finite.length ? Math.max(...finite) : NaN };
  }

  function copy(method, text, i) {
    const box = el("div", "copy");
    box.dataset.method = method.label;
    box.dataset.run = method.run;
    const head = el("div", "copy-head");
    const name = el("b", "defined", method.label);
    name.title = method.definition;
    head.appendChild(name);
    head.appendChild(el("span", "src", "from " + method.families.join(", ")));
    box.appendChild(head);
    const body = el("div", "text");
    box.appendChild(body);
    const scale = el("span", "scale", "");
    head.appendChild(scale);
    if (method.codes[i] === null || method.scales[i] === null) {
      body.appendChild(el("span", "note", "no score for this instance (not computed, or missing: e.g. no adversary within ε)"));
      return box;
    }
    const q = new Int8Array(bytes(method.codes[i]).buffer);
    const shown = drawnItems(q, method.scales[i], text, i);
    const top = shown.top, items = shown.items;
    scale.textContent = Number.isFinite(top) && top > 0 ? "full colour at |score| = " + number(top) : "";
    const more = el("button", "more");
    more.type = "button";
    body.appendChild(more);
    let drawn = 0;
    function draw() {
      // the next D.chunk tokens (or words), before the button; the button says what is left, and goes when nothing is
      const end = Math.min(items.length, drawn + D.chunk);
      const parts = document.createDocumentFragment();
      for (let t = drawn; t < end; t++) {
        const it = items[t];
        const shade = top > 0 ? it.score / top : it.score === 0 ? 0 : NaN;
        const span = el("span", "tok" + (Math.abs(shade) > D.scale.dark ? " dark" : ""), it.label);
        span.style.backgroundColor = colour(shade);
        const value = Number.isNaN(shade) ? "n/a" : number(it.score);
        span.title = it.title === null ? value : it.title + ": " + value;
        if (it.title !== null) span.dataset.pieces = it.title;
        parts.appendChild(span);
        parts.appendChild(document.createTextNode(" "));
      }
      body.insertBefore(parts, more);
      drawn = end;
      const left = items.length - drawn;
      const unit = items.length === text.length ? " tokens" : " words";
      if (left > 0) more.textContent = "show " + Math.min(D.chunk, left) + " more" + unit + " (" + left + " not shown)";
      else more.remove();
    }
    more.addEventListener("click", draw);
    draw();
    return box;
  }

  function legend() {
    const p = el("p", "note legend");
    p.appendChild(document.createTextNode("Each copy on its own scale: a token's shade is its score over the copy's largest |score| "));
    for (const s of [-1, -0.5, 0, 0.5, 1]) {
      const span = el("span", "tok" + (Math.abs(s) > D.scale.dark ? " dark" : ""), String(s));
      span.style.backgroundColor = colour(s);
      p.appendChild(span);
      p.appendChild(document.createTextNode(" "));
    }
    const words = D.word_rules ? "; a word: its pieces and its score" : "";
    p.appendChild(document.createTextNode(" (hover a token for its score" + words + ", a method's name for what it is)."));
    return p;
  }

  function numbers(i) {
    const box = el("div", "numbers");
    const t = el("table");
    let group = null;
    for (const col of columns) {
      if (col.key === "uid" || col.key === "text") continue;
      if (col.group !== group) {
        group = col.group;
        const tr = el("tr");
        const th = el("th", null, group || "instance");
        th.colSpan = 2;
        tr.appendChild(th);
        t.appendChild(tr);
      }
      const tr = el("tr");
      tr.appendChild(el("td", null, col.name + (col.main ? " ★" : "")));
      const td = el("td", "value", display(col, i));
      td.dataset.key = col.key;
      tr.appendChild(td);
      t.appendChild(tr);
    }
    box.appendChild(t);
    return box;
  }

  function query(i) {
    const words = ids(D.queries, i);
    if (words === null) return null;
    const p = el("p", "query", "query: ");
    pieces(p, Array.from(words, (id) => D.vocab[id]));
    return p;
  }

  function select(i) {
    selected = i;
    tbody.querySelectorAll("tr.row.selected").forEach((tr) => tr.classList.remove("selected"));
    const tr = tbody.querySelector('tr.row[data-row="' + i + '"]');
    if (tr) tr.classList.add("selected");
    const out = $("instance");
    out.textContent = "";
    out.dataset.uid = D.uids[i];
    const members = D.members ? D.members[i] : null; // the runs this row holds (across runs)
    const only = members && members.length < D.runs.length ? " (" + members.map((k) => D.runs[k].name).join(", ") + " only)" : "";
    out.appendChild(el("h2", null, D.uids[i] + only));
    const meta = el("p", "meta");
    D.runs.forEach(function (run) {
      const parts = [];
      for (const [what, key] of [["gold", run.label], ["predicted", run.prediction], ["p", run.probability]]) {
        if (key && byKey[key] && byKey[key].values[i] !== null) parts.push(what + ": " + display(byKey[key], i));
      }
      if (run.correct && byKey[run.correct] && byKey[run.correct].values[i] !== null) {
        parts.push(byKey[run.correct].values[i] ? "correct" : "wrong");
      }
      if (parts.length) meta.appendChild(el("div", null, (D.runs.length > 1 ? run.name + ": " : "") + parts.join(" · ")));
    });
    out.appendChild(meta);
    const layout = el("div", "layout");
    const copies = el("div", "copies");
    copies.appendChild(legend());
    const text = ids(D.texts, i); // decoded once: every copy draws from it
    const asked = text === null ? null : query(i);
    if (asked) copies.appendChild(asked);
    let lastRun = null, any = false;
    for (const method of D.methods) {
      if (text === null || (members && members.indexOf(method.run) < 0)) continue;
      if (D.runs.length > 1 && method.run !== lastRun) {
        lastRun = method.run;
        copies.appendChild(el("h3", null, D.runs[method.run].name));
      }
      copies.appendChild(copy(method, text, i));
      any = true;
    }
    if (!any) copies.appendChild(el("p", "note", D.no_text));
    layout.appendChild(copies);
    layout.appendChild(numbers(i));
    out.appendChild(layout);
  }

  shown = visibleColumns();
  chooser();
  header();
  refresh();
  window.explorerReadyMs = performance.now(); // when the table is drawn (benchmarks/explorer_page.py reads it)
})();
