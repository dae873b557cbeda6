// netjam's dashboard: plots a run from its start (GET /v1/series and GET
// /v1/timeline, whenever the page is opened), then its event stream (GET
// /v1/events) as it arrives, and changes its path through the control
// API, so that every change made here is recorded and replayable as any
// other. It loads nothing but this endpoint's own files and talks to
// nothing else. Its token form and helpers are api.js's, loaded before
// this file.
"use strict";
(() => {
  // The saved report's palette (report/render.go): Okabe and Ito's.
  const palette = ["#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000"];
  const timeLabel = "time since the run's start (s)";
  const maxPoints = 4000; // per curve; older points are merged in pairs beyond
  const svgNS = "http://www.w3.org/2000/svg";

  // The plots, as the report has them: kinds of timeseries.csv's rows,
  // scaled into the axis' unit.
  const plots = [
    { id: "throughput", title: "throughput per flow", y: "throughput (Mbit/s)", always: true,
      curves: [{ kind: "throughput_bps", scale: 1e-6 }] },
    { id: "rate", title: "rate per direction: achieved (IP) and configured", y: "rate (Mbit/s)", always: true,
      curves: [{ kind: "link_bps", scale: 1e-6, suffix: " achieved" },
        { kind: "configured_rate_bps", scale: 1e-6, suffix: " configured", dash: "6 4", skipZero: true }] },
    { id: "delay", title: "one-way delay of the UDP flows (mean per sample interval)", y: "one-way delay (ms)",
      curves: [{ kind: "delay_ms", scale: 1 }] },
    { id: "loss", title: "loss of the UDP flows (per sample interval)", y: "loss (%)",
      note: "loss: of the datagrams whose fate a flow learned in the interval (arrived, or found lost), the share found lost, 0 to 100%",
      curves: [{ kind: "loss_ratio", scale: 100 }] },
    { id: "rtt", title: "smoothed RTT of the TCP flows (sender's srtt)", y: "smoothed RTT (ms)",
      curves: [{ kind: "srtt_ms", scale: 1 }] },
    { id: "queue", title: "bottleneck queue length", y: "queue length (packets)",
      curves: [{ kind: "queue_packets", scale: 1 }] },
    { id: "sojourn", title: "bottleneck sojourn time", y: "sojourn time (ms)",
      curves: [{ kind: "sojourn_ms", scale: 1 }] },
    { id: "drops", title: "drops per direction", y: "drops in the interval",
      curves: [{ kind: "drops", scale: 1 }] },
    { id: "airtime", title: "Wi-Fi medium: airtime share per station", y: "airtime share (%)",
      curves: [{ kind: "airtime_share", scale: 100 }] },
  ];

  const st = {
    status: null, // GET /v1/status
    // kind -> Map(name -> [[t, mean, min, max], ...]): a point of GET
    // /v1/series (the mean, least and greatest of the samples it
    // merges) or a sample (all three its value); [t, NaN] is a gap.
    series: new Map(),
    seen: new Map(), // "kind|name" -> the time of the last sample it had a value in
    lastT: -1, // the last sample's time
    // The timeline: changes applied, a ramp's steps as one entry:
    // { time_s, to_s, steps, changes }, as GET /v1/timeline has them.
    entries: [],
    omitted: null, // { n, from, to }: changes the endpoint did not keep
    last: new Map(), // "kind|name" -> the last sample's value
    ended: false,
    finished: false,
    drawQueued: false,
    // The event stream's numbering: the last event taken in, and those
    // GET /v1/series and GET /v1/timeline were up to.
    seq: 0,
    seriesSeq: 0,
    timelineSeq: 0,
  };

  // The token form, api() and the helpers, shared with netjam proxy's
  // dashboard (api.js): the form's token opens / for this port, and its
  // cookie goes with the event stream and the report's link too.
  const { $, api, setState, num, urlToken } = dashboard({
    home: "/",
    check: "/v1/status",
    peer: "the endpoint",
    emptyToken: "give the token netjam printed with the dashboard's URL",
    onLogin: (r) => begin(r),
  });

  function fmtRate(bps) {
    if (!bps) return "unlimited";
    if (bps >= 1e9) return num(bps / 1e9) + " Gbit/s";
    if (bps >= 1e6) return num(bps / 1e6) + " Mbit/s";
    if (bps >= 1e3) return num(bps / 1e3) + " kbit/s";
    return num(bps) + " bit/s";
  }

  // ---- the plots ----

  // addPoint adds a point of a series at x: the mean, least and
  // greatest of its samples, the last of which was at time at; prevT is
  // the time of the sample before the point's first. A series that had
  // no value then (a UDP flow's delay while nothing arrived) gets a gap,
  // [x, NaN], which the plot leaves blank rather than draw a straight
  // line across.
  function addPoint(kind, name, x, mean, lo, hi, at, prevT) {
    let byName = st.series.get(kind);
    if (!byName) st.series.set(kind, (byName = new Map()));
    let pts = byName.get(name);
    if (!pts) byName.set(name, (pts = []));
    const key = kind + "|" + name;
    if (pts.length && prevT >= 0 && st.seen.get(key) < prevT - 1e-9) pts.push([x, NaN]);
    pts.push([x, mean, lo, hi]);
    st.seen.set(key, at);
    if (pts.length > maxPoints) byName.set(name, thin(pts));
  }

  // addRow adds a sample's row at time t; prevT is the time of the
  // sample before it.
  function addRow(t, kind, name, value, prevT) {
    addPoint(kind, name, t, value, value, value, t, prevT);
    st.last.set(kind + "|" + name, value);
  }

  // thin merges the older half's points in pairs (mean of the two, their
  // least and greatest), keeping its gaps: bounded memory, the recent
  // past at full resolution.
  function thin(pts) {
    const half = pts.length >> 1;
    const out = [];
    for (let i = 0; i < half; i++) {
      const a = pts[i], b = pts[i + 1];
      if (i + 1 < half && !Number.isNaN(a[1]) && !Number.isNaN(b[1])) {
        out.push([(a[0] + b[0]) / 2, (a[1] + b[1]) / 2, Math.min(a[2], b[2]), Math.max(a[3], b[3])]);
        i++;
      } else {
        out.push(a);
      }
    }
    return out.concat(pts.slice(half));
  }

  // loadSeries plots GET /v1/series's answer: the run's series from its
  // start, each point at the middle of its samples' times.
  function loadSeries(s) {
    const n = s.to_s.length;
    for (const sr of s.series) {
      for (let i = 0; i < n; i++) {
        if (sr.mean[i] === null) continue;
        const prevT = i > 0 ? s.to_s[i - 1] : -1;
        addPoint(sr.kind, sr.name, (s.from_s[i] + s.to_s[i]) / 2, sr.mean[i], sr.min[i], sr.max[i], s.to_s[i], prevT);
      }
      st.last.set(sr.kind + "|" + sr.name, sr.last);
    }
    if (n) st.lastT = s.to_s[n - 1];
  }

  // segments splits a series at its gaps.
  function segments(pts) {
    const out = [[]];
    for (const q of pts) {
      if (Number.isNaN(q[1])) {
        if (out[out.length - 1].length) out.push([]);
      } else {
        out[out.length - 1].push(q);
      }
    }
    return out.filter((seg) => seg.length);
  }

  // rampStep is the longest step between two changes of a ramp (a
  // timeline's ramp changes its keys in equal steps of at most 10 ms),
  // as the endpoint's GET /v1/timeline has it.
  const rampStep = 0.0105;

  const keysOf = (chs) => chs.map((c) => c.key).join(" ");
  // rampable: changes that may be a ramp's step (applied, not a reset).
  const rampable = (chs) => chs.every((c) => !c.error && c.key !== "reset");
  // stepped is a ramp's changes with chs as its last step.
  const stepped = (e, chs) => e.changes.map((c, i) => Object.assign({}, c, { new: chs[i].new }));

  // addChange adds a change event's changes at time to the timeline, as
  // GET /v1/timeline does: three or more changes of the same keys, each
  // within rampStep of the one before, are one ramp entry (a ramp of 2 s
  // is 200 changes), drawn as one band from its first to its last.
  function addChange(time, chs) {
    const n = st.entries.length;
    const keys = keysOf(chs);
    if (n && rampable(chs)) {
      const b = st.entries[n - 1], a = st.entries[n - 2];
      if (b.steps >= 3 && keysOf(b.changes) === keys && time - b.to_s <= rampStep) {
        Object.assign(b, { to_s: time, steps: b.steps + 1, changes: stepped(b, chs) });
        return;
      }
      if (a && a.steps === 1 && b.steps === 1 && rampable(a.changes) && rampable(b.changes) &&
          keysOf(a.changes) === keys && keysOf(b.changes) === keys &&
          b.time_s - a.time_s <= rampStep && time - b.time_s <= rampStep) {
        st.entries.splice(n - 2, 2, { time_s: a.time_s, to_s: time, steps: 3, changes: stepped(a, chs) });
        return;
      }
    }
    st.entries.push({ time_s: time, to_s: time, steps: 1, changes: chs });
  }

  // bands are the timeline's entries as the plots mark them: a ramp as a
  // band from its first step to its last, a change as a line.
  function bands(entries) {
    return entries.map((e) => ({ from: e.time_s, to: e.steps >= 3 ? e.to_s : e.time_s }));
  }

  // niceStep is the report's: 1, 2, 2.5 or 5 times a power of ten.
  function niceStep(raw) {
    if (!(raw > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) {
      if (m * p >= raw) return m * p;
    }
    return 10 * p;
  }

  // ticks are an axis' labelled values, from 0 to the first at or above
  // hi, about n steps.
  function ticks(hi, n) {
    const step = niceStep(hi / n);
    const top = Math.ceil(hi / step - 1e-9) * step;
    const out = [];
    for (let i = 0; i * step <= top + step * 1e-9; i++) out.push(+(i * step).toFixed(10));
    return { step, ticks: out };
  }

  function el(name, attrs, text) {
    const e = document.createElementNS(svgNS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function figure(p) {
    let fig = $("plot-" + p.id);
    if (fig) return fig;
    fig = document.createElement("figure");
    fig.id = "plot-" + p.id;
    const cap = document.createElement("figcaption");
    cap.textContent = p.title;
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("class", "plot");
    svg.setAttribute("viewBox", "0 0 560 300");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", p.title);
    const legend = document.createElement("div");
    legend.className = "legend";
    fig.append(cap, svg, legend);
    $("plots").append(fig);
    return fig;
  }

  function draw() {
    st.drawQueued = false;
    const duration = st.status ? st.status.duration_s : 0;
    const xmax = Math.max(duration, st.lastT, 1);
    for (const p of plots) {
      const curves = [];
      for (const c of p.curves) {
        const byName = st.series.get(c.kind);
        if (!byName) continue;
        for (const [name, pts] of byName) {
          if (c.skipZero && pts.every((q) => q[1] === 0)) continue;
          curves.push({ label: name + (c.suffix || ""), pts, scale: c.scale, dash: c.dash });
        }
      }
      if (!curves.length && !p.always) continue;
      drawPlot(figure(p), p, curves, xmax);
    }
  }

  function drawPlot(fig, p, curves, xmax) {
    const svg = fig.querySelector("svg");
    const L = 56, R = 548, T = 10, B = 256;
    let ymax = 0;
    for (const c of curves) for (const q of c.pts) if (!Number.isNaN(q[1])) ymax = Math.max(ymax, q[3] * c.scale);
    const yt = ticks(ymax > 0 ? ymax * 1.05 : 1, 5);
    const ytop = yt.ticks[yt.ticks.length - 1];
    const xt = ticks(xmax, 8);
    const xtop = xt.ticks[xt.ticks.length - 1] || xmax;
    const X = (t) => L + (R - L) * (t / xtop);
    const Y = (v) => B - (B - T) * (v / ytop);
    svg.replaceChildren();
    for (const v of yt.ticks) {
      svg.append(el("line", { class: "grid", x1: L, x2: R, y1: Y(v), y2: Y(v) }));
      svg.append(el("text", { x: L - 4, y: Y(v) + 4, "text-anchor": "end" }, num(v)));
    }
    for (const t of xt.ticks) {
      svg.append(el("line", { class: "grid", x1: X(t), x2: X(t), y1: T, y2: B }));
      svg.append(el("text", { x: X(t), y: B + 14, "text-anchor": "middle" }, num(t)));
    }
    const defs = el("defs", {});
    const hatch = el("pattern", { id: "hatch-" + p.id, patternUnits: "userSpaceOnUse", width: 6, height: 6, patternTransform: "rotate(45)" });
    hatch.append(el("rect", { width: 6, height: 6, class: "ramp-fill" }), el("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "ramp-hatch" }));
    defs.append(hatch);
    svg.append(defs);
    for (const b of bands(st.entries)) {
      if (b.to > b.from) {
        svg.append(el("rect", { class: "ramp", x: X(b.from), y: T, width: Math.max(X(b.to) - X(b.from), 1), height: B - T, fill: `url(#hatch-${p.id})` }));
      } else {
        svg.append(el("line", { class: "mark", x1: X(b.from), x2: X(b.from), y1: T, y2: B }));
      }
    }
    for (const pc of (st.status && st.status.pending) || []) {
      svg.append(el("line", { class: "pending", x1: X(pc.at_s), x2: X(pc.at_s), y1: T, y2: B }));
    }
    svg.append(el("line", { class: "axis", x1: L, x2: R, y1: B, y2: B }));
    svg.append(el("line", { class: "axis", x1: L, x2: L, y1: T, y2: B }));
    svg.append(el("text", { x: (L + R) / 2, y: 290, "text-anchor": "middle" }, timeLabel));
    svg.append(el("text", { x: 12, y: (T + B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + B) / 2})` }, p.y));
    const legend = fig.querySelector(".legend");
    legend.replaceChildren();
    curves.forEach((c, i) => {
      const color = palette[i % palette.length];
      for (const seg of segments(c.pts)) {
        // Where points merge samples, their least to greatest, shaded.
        if (seg.some((q) => q[2] !== q[3])) {
          const edge = (q, k) => X(q[0]).toFixed(1) + "," + Y(q[k] * c.scale).toFixed(1);
          const around = seg.map((q) => edge(q, 3)).concat(seg.slice().reverse().map((q) => edge(q, 2)));
          svg.append(el("polygon", { class: "range", "data-name": c.label, fill: color, points: around.join(" ") }));
        }
        const attrs = { class: "series", "data-name": c.label, stroke: color,
          points: seg.map((q) => X(q[0]).toFixed(1) + "," + Y(q[1] * c.scale).toFixed(1)).join(" ") };
        if (c.dash) attrs["stroke-dasharray"] = c.dash;
        svg.append(el("polyline", attrs));
      }
      const item = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color;
      item.append(swatch, c.label);
      legend.append(item);
    });
    if (p.note) {
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = p.note;
      legend.append(note);
    }
  }

  function queueDraw() {
    if (!st.drawQueued) {
      st.drawQueued = true;
      requestAnimationFrame(draw);
    }
  }

  // ---- the controls ----

  // The run-time-changeable settings of a direction: the key a change
  // sends, and the value in force as the scenario writes it.
  const knobs = [
    { id: "rate", label: "rate", hint: "10Mbps", cur: (c) => fmtRate(c.rate_bps) },
    { id: "delay", label: "delay", hint: "20ms", cur: (c) => num(c.delay_ms) + " ms" },
    { id: "jitter", label: "jitter", hint: "5ms", cur: (c) => num(c.jitter_ms) + " ms" },
    { id: "loss", label: "loss", hint: "1%", cur: (c) => num(c.loss_ratio * 100) + "%" },
    { id: "queue", label: "queue", hint: "100", cur: (c) => (c.queue_limit_packets ? c.queue_limit_packets + " packets" : c.queue_limit_bytes ? c.queue_limit_bytes + " bytes" : "none (no rate)") },
  ];

  // dirKey is the key prefix of a direction as GET /v1/links names it:
  // link.uplink with the link shorthand, links.eu.uplink for a link of
  // a links list (eu.uplink).
  function dirKey(dir) {
    return (dir.includes(".") ? "links." : "link.") + dir;
  }

  // change is a knob's PATCH body for what was typed: delay and jitter
  // are one mapping, so that setting one keeps the other.
  function change(dir, knob, typed, conf) {
    const base = dirKey(dir);
    switch (knob) {
      case "rate": return { [base + ".rate"]: typed };
      case "loss": return { [base + ".loss"]: typed };
      case "queue": return { [base + ".queue.limit"]: typed };
    }
    const time = knob === "delay" ? typed : num(conf.delay_ms) + "ms";
    const jitter = knob === "jitter" ? typed : num(conf.jitter_ms) + "ms";
    if (knob === "delay" && !conf.jitter_ms) return { [base + ".delay"]: typed };
    let v = "{time: " + time + ", jitter: " + jitter;
    if (conf.distribution) v += ", distribution: " + conf.distribution;
    return { [base + ".delay"]: v + "}" };
  }

  function buildLinks(links) {
    const box = $("links");
    box.replaceChildren();
    for (const l of links) {
      const div = document.createElement("div");
      div.className = "link";
      div.dataset.dir = l.name;
      const h = document.createElement("h3");
      h.textContent = l.name;
      div.append(h);
      for (const k of knobs) {
        const key = dirKey(l.name) + "." + k.id;
        const form = document.createElement("form");
        form.className = "knob";
        const lab = document.createElement("label");
        lab.textContent = k.label;
        lab.htmlFor = "in-" + l.name + "-" + k.id;
        const input = document.createElement("input");
        input.id = "in-" + l.name + "-" + k.id;
        input.dataset.key = key;
        input.placeholder = k.hint;
        input.autocomplete = "off";
        const cur = document.createElement("span");
        cur.className = "cur";
        cur.dataset.key = key;
        const err = document.createElement("span");
        err.className = "err";
        err.dataset.key = key;
        form.append(lab, input, cur, err);
        form.addEventListener("submit", async (ev) => {
          ev.preventDefault();
          const typed = input.value.trim();
          if (!typed) return;
          const conf = linkConf(l.name);
          const r = await api("PATCH", "/v1/links", { set: change(l.name, k.id, typed, conf) });
          if (r.ok) {
            err.textContent = "";
            input.value = "";
            showLinks(r.data.links);
          } else {
            err.textContent = r.data.error;
          }
        });
        div.append(form);
      }
      const ach = document.createElement("div");
      ach.className = "achieved";
      ach.dataset.dir = l.name;
      div.append(ach);
      box.append(div);
    }
  }

  function linkConf(dir) {
    const l = ((st.status && st.status.links) || []).find((x) => x.name === dir);
    return l ? l.configured : {};
  }

  function showLinks(links) {
    if (!st.status) return;
    st.status.links = links;
    if (document.querySelectorAll("#links .link").length !== links.length) buildLinks(links);
    for (const l of links) {
      for (const k of knobs) {
        const cur = document.querySelector(`.cur[data-key="${dirKey(l.name)}.${k.id}"]`);
        if (cur) cur.textContent = k.cur(l.configured);
      }
    }
  }

  function showAchieved() {
    for (const ach of document.querySelectorAll(".achieved")) {
      const d = ach.dataset.dir;
      const bps = st.last.get("link_bps|" + d);
      if (bps === undefined) continue;
      ach.dataset.bps = bps;
      let text = "achieved " + fmtRate(bps).replace("unlimited", "0 bit/s");
      const q = st.last.get("queue_packets|" + d);
      if (q !== undefined) text += ", queue " + q + " packets";
      text += ", drops " + (st.last.get("drops|" + d) || 0) + " in the last interval";
      ach.textContent = text;
    }
  }

  function showTimeline() {
    const ol = $("timeline");
    ol.replaceChildren();
    const item = (text, cls) => {
      const li = document.createElement("li");
      li.textContent = text;
      if (cls) li.className = cls;
      ol.append(li);
    };
    const change = (c) => `${c.key} ${c.old || "(default)"} → ${c.new || "(default)"}`;
    let omittedShown = !st.omitted;
    for (const e of st.entries) {
      if (!omittedShown && e.time_s >= st.omitted.to) {
        item(`… ${st.omitted.n} changes from ${num(st.omitted.from)} s to ${num(st.omitted.to)} s not kept by the endpoint …`, "omitted");
        omittedShown = true;
      }
      if (e.steps >= 3) {
        item(`${num(e.time_s)}–${num(e.to_s)} s: ramp of ${e.steps} steps: ` + e.changes.map(change).join(", "), "ramp");
        continue;
      }
      for (const c of e.changes) item(`${num(c.time_s)} s: ${change(c)}` + (c.error ? ` refused: ${c.error}` : ""), c.error ? "error" : "");
    }
    for (const p of (st.status && st.status.pending) || []) {
      const li = document.createElement("li");
      li.className = "pending";
      li.textContent = `${num(p.at_s)} s (pending): ${p.set.join(", ")}`;
      ol.append(li);
    }
  }

  // showFlowChoices offers the run's TCP flows to the connection reset.
  function showFlowChoices(fl) {
    const sel = $("flow-reset-name");
    const names = (fl || []).filter((f) => f.type === "tcp").map((f) => f.name);
    if (sel.dataset.names === names.join(",")) return;
    sel.dataset.names = names.join(",");
    sel.replaceChildren(...names.map((n) => {
      const o = document.createElement("option");
      o.value = o.textContent = n;
      return o;
    }));
    $("flow-reset").disabled = names.length === 0;
  }

  async function refresh() {
    const r = await api("GET", "/v1/status");
    if (!r.ok) return;
    st.status = r.data;
    showFlowChoices(r.data.flows);
    $("scenario").textContent = r.data.scenario + (r.data.variant ? " / " + r.data.variant : "");
    showLinks(r.data.links);
    showTimeline();
    queueDraw();
  }

  async function pathAction(method, path, body) {
    const r = await api(method, path, body);
    $("path-err").textContent = r.ok ? "" : r.data.error;
    if (r.ok && r.data && Array.isArray(r.data.links)) showLinks(r.data.links);
    return r;
  }

  $("outage").addEventListener("click", () => {
    const n = parseFloat($("outage-seconds").value);
    if (!(n > 0)) {
      $("path-err").textContent = "outage: a number of seconds above 0";
      return;
    }
    // Every direction of every link loses everything.
    const set = {};
    for (const l of (st.status && st.status.links) || [{ name: "uplink" }, { name: "downlink" }]) set[dirKey(l.name) + ".loss"] = "100%";
    pathAction("PATCH", "/v1/links", { set, for: n + "s" });
  });
  $("reset").addEventListener("click", () => pathAction("POST", "/v1/reset"));
  $("flow-reset").addEventListener("click", async () => {
    const name = $("flow-reset-name").value;
    if (!name) return;
    const r = await api("POST", "/v1/flows/" + encodeURIComponent(name) + "/reset");
    $("flow-err").textContent = r.ok ? "" : r.data.error;
  });
  $("stop").addEventListener("click", async () => {
    const r = await pathAction("POST", "/v1/stop");
    if (r.ok && st.finished) setState("ended", "netjam has quit");
  });

  // ---- the event stream ----

  const handlers = {
    run(d) {
      st.status = d;
      st.series.clear();
      st.seen.clear();
      st.last.clear();
      st.entries = [];
      st.omitted = null;
      st.lastT = -1;
      st.ended = false;
      $("plots").replaceChildren();
      $("scenario").textContent = d.scenario + (d.variant ? " / " + d.variant : "");
      buildLinks(d.links);
      showLinks(d.links);
      $("flow-reset-name").disabled = false;
      $("flow-err").textContent = "";
      showFlowChoices(d.flows);
      $("flow-reset").disabled = !(d.flows || []).some((f) => f.type === "tcp");
      setState("running", "running");
      queueDraw();
    },
    sample(d) {
      if (d.time_s <= st.lastT) return; // seen before a reconnection
      const prevT = st.lastT;
      st.lastT = d.time_s;
      for (const r of d.rows) addRow(d.time_s, r.kind, r.name, r.value, prevT);
      if (st.status) {
        const left = Math.max(0, st.status.duration_s - d.time_s);
        setState("running", `running: ${num(d.time_s)} s of ${num(st.status.duration_s)} s` + (left ? "" : ", draining"));
      }
      showAchieved();
      queueDraw();
    },
    change(d) {
      addChange(d.time_s, d.changes);
      refresh();
    },
    scheduled() {
      refresh();
    },
    end() {
      st.ended = true;
      // The flows stay listed, as they ended; none can be reset now.
      $("flow-reset-name").disabled = $("flow-reset").disabled = true;
      $("flow-err").textContent = "the run has ended";
      setState("ended", "the run has ended" + (st.finished ? "" : "; writing the results…"));
      queueDraw();
    },
    finished(d) {
      st.finished = true;
      setState("ended", "the run has ended: the results are written");
      const a = $("report");
      a.href = d.report;
      a.textContent = "the report";
      a.hidden = false;
      $("stop").textContent = "Quit";
      $("stop").title = "stop serving this page";
    },
  };

  // The page takes the run from its start (GET /v1/series and GET
  // /v1/timeline), then the event stream after the event those were up
  // to (?after=N): each event has a number, one more than the last; one
  // that is not (events the stream no longer held, another netjam on
  // the port) has the page take the run from its start again.
  let source = null;
  let loads = 0; // the load under way: a later one supersedes it

  // loadRun takes the run from its start and opens the event stream.
  async function loadRun() {
    const mine = ++loads;
    if (source) source.close();
    source = null;
    let s, tl;
    for (let tries = 0; ; tries++) {
      [s, tl] = await Promise.all([api("GET", "/v1/series"), api("GET", "/v1/timeline")]);
      if (mine !== loads) return;
      if (!s.ok || !tl.ok) {
        if (s.status !== 401 && tl.status !== 401) {
          setState("lost", "the endpoint does not answer; trying again…");
          setTimeout(() => mine === loads && loadRun(), 1000);
        }
        return;
      }
      // A run that started between the two: take both again.
      if (s.data.run_seq === tl.data.run_seq || tries >= 3) break;
    }
    takeTimeline(tl.data);
    loadSeries(s.data);
    st.seriesSeq = s.data.seq;
    st.timelineSeq = tl.data.seq;
    st.seq = Math.min(s.data.seq, tl.data.seq);
    showAchieved();
    showTimeline();
    queueDraw();
    refresh();
    follow(mine);
  }

  // takeTimeline takes GET /v1/timeline's answer: the run's status as it
  // started, its changes, its end and its results.
  function takeTimeline(tl) {
    if (tl.run) {
      handlers.run(tl.run);
    } else {
      st.series.clear();
      st.seen.clear();
      st.entries = [];
      $("plots").replaceChildren();
      setState("waiting", "waiting for a run");
    }
    st.entries = tl.changes.map((e) => Object.assign({}, e));
    st.omitted = tl.omitted ? { n: tl.omitted, from: tl.omitted_from_s, to: tl.omitted_to_s } : null;
    if (tl.end_s !== undefined) handlers.end({ time_s: tl.end_s });
    if (tl.report) handlers.finished({ report: tl.report });
  }

  // follow opens the event stream after the event st.seq, for load mine.
  function follow(mine) {
    const es = new EventSource("/v1/events?after=" + st.seq);
    source = es;
    for (const [type, f] of Object.entries(handlers)) {
      es.addEventListener(type, (ev) => {
        if (source !== es || mine !== loads) return;
        const id = Number(ev.lastEventId);
        if (id !== st.seq + 1) {
          loadRun(); // events missed: the run from its start again
          return;
        }
        st.seq = id;
        // What GET /v1/series or /v1/timeline had already.
        if (type === "sample" ? id <= st.seriesSeq : id <= st.timelineSeq) return;
        f(JSON.parse(ev.data));
      });
    }
    es.onopen = () => {
      if (!st.ended && st.status) setState("running", "running");
    };
    es.onerror = () => {
      if (st.finished) {
        es.close();
        setState("ended", "the run has ended; netjam no longer serves this page");
      } else if (!st.ended) {
        setState("lost", "the event stream was cut; reconnecting…");
      }
    };
  }

  // begin starts the page once GET /v1/status answered r.
  function begin(r) {
    if (r.status === 409) setState("waiting", "waiting for a run");
    loadRun();
  }
  api("GET", "/v1/status").then((r) => {
    if (r.status !== 401) {
      begin(r);
    } else if (urlToken) {
      // else the login form begins
      $("login-err").textContent = "the URL's token is not this endpoint's (a previous run's?): " + r.data.error;
    }
  });
})();
