// netjam proxy's dashboard: lists the proxies and their toxics, polling
// GET /ui/proxies once a second (one request at a time). It only reads;
// changes go through toxiproxy's API, which browsers may not call. Every
// name and value is user input and is set as text, never as HTML. It
// loads nothing but this server's own files and talks to nothing else.
// Its style, its token form and its helpers are the run dashboard's
// (control/ui/style.css, control/ui/api.js, loaded before this file).
"use strict";
(() => {
  const period = 1000; // ms between the end of a poll and the next
  let last = ""; // the last answer's text: the page is redrawn when it changes
  let timer = null;

  // The token form, api() and the helpers, as the run dashboard has them
  // (control/ui/api.js): the form's token opens /ui/ for this port.
  const { $, api, setState, num } = dashboard({
    home: "/ui/",
    check: "/ui/proxies",
    peer: "the server",
    emptyToken: "give the token of netjam proxy's --token file",
    fetchInit: { cache: "no-store" }, // each poll asks the server anew
    onLogin: () => schedule(0),
  });

  function fmtBytes(n) {
    if (n >= 1e9) return num(n / 1e9) + " GB";
    if (n >= 1e6) return num(n / 1e6) + " MB";
    if (n >= 1e3) return num(n / 1e3) + " kB";
    return n + " B";
  }
  // counts writes {reason: n} as "reason n, ...", the non-zero ones.
  function counts(m) {
    const parts = Object.keys(m).sort().filter((k) => m[k] > 0).map((k) => k + " " + m[k]);
    return parts.length ? parts.join(", ") : "none";
  }

  // el makes an element with text (never HTML) and, optionally, a class.
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function row(table, cells, header) {
    const tr = table.insertRow();
    for (const c of cells) tr.appendChild(el(header ? "th" : "td", c));
    return tr;
  }

  function proxyBox(p) {
    const box = el("section", undefined, "link proxy");
    box.dataset.proxy = p.name;
    const h = el("h3");
    h.appendChild(el("span", p.name, "name"));
    h.appendChild(el("span", p.enabled ? " enabled" : " disabled", p.enabled ? "on" : "off"));
    box.appendChild(h);
    const kv = el("table", undefined, "kv");
    const field = (k, v, key) => {
      const tr = row(kv, [k, v]);
      tr.cells[1].dataset.key = key;
    };
    field("listen", p.listen + (p.protocol === "udp" ? " (udp)" : ""), "listen");
    field("upstream", p.upstream, "upstream");
    field(p.protocol === "udp" ? "open sessions" : "open connections", String(p.open), "open");
    field("accepted", String(p.accepted), "accepted");
    field("bytes upstream", fmtBytes(p.received.upstream) + " in, " + fmtBytes(p.sent.upstream) + " out", "upstream-bytes");
    field("bytes downstream", fmtBytes(p.received.downstream) + " in, " + fmtBytes(p.sent.downstream) + " out", "downstream-bytes");
    field("paths", p.paths + (p.tcp_retransmits ? ", " + p.tcp_retransmits + " TCP retransmits" : ""), "paths");
    field("drops uplink", counts(p.drops.uplink), "drops-uplink");
    field("drops downlink", counts(p.drops.downlink), "drops-downlink");
    const refused = Object.assign({}, p.refused);
    if (p.datagrams_dropped) refused["datagrams dropped"] = p.datagrams_dropped;
    if (p.toxic_resets) refused["reset by a toxic"] = p.toxic_resets;
    field("refused", counts(refused), "refused");
    field("discarded", counts({ upstream: p.discarded.upstream, downstream: p.discarded.downstream }), "discarded");
    box.appendChild(kv);
    if (p.toxics.length === 0) {
      box.appendChild(el("p", "no toxics", "cur"));
      return box;
    }
    const tt = el("table", undefined, "toxics");
    row(tt, ["toxic", "type", "stream", "toxicity", "attributes"], true);
    for (const t of p.toxics) {
      const tr = row(tt, [t.name, t.type, t.stream, num(t.toxicity), t.attributes.map(([k, v]) => k + "=" + v).join(", ")]);
      tr.dataset.toxic = t.name;
    }
    box.appendChild(tt);
    return box;
  }

  function draw(s) {
    $("version").textContent = s.version;
    const boxes = s.proxies.map(proxyBox);
    $("proxies").replaceChildren(...boxes);
    $("none").hidden = s.proxies.length > 0 || s.omitted > 0;
    $("omitted").hidden = s.omitted === 0;
    $("omitted").textContent = s.omitted + " more proxies, past the first " + s.proxies.length + " by name, are not shown";
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(poll, ms);
  }

  async function poll() {
    const r = await api("GET", "/ui/proxies");
    if (r.status === 401) {
      setState("lost", "needs the token");
      return; // the form's submit polls again
    }
    if (!r.ok) {
      setState("lost", "lost: " + (r.data && r.data.error) + "; retrying");
      schedule(2 * period);
      return;
    }
    setState("running", "live");
    if (r.text !== last) {
      last = r.text;
      draw(r.data);
    }
    schedule(period);
  }

  schedule(0);
})();
