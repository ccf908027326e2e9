// pgbisect dashboard: the charts (uPlot, vendored) and the live updates
// (server-sent events). Pages work without it, minus charts and liveness.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const fmt = (v) => (v == null || !isFinite(v)) ? "–" : (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4));
  const pct = (f) => (f * 100).toFixed(1) + "%";
  const day = (t) => new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  const short = (h) => h.slice(0, 10);

  // line draws a vertical line at x (canvas pixels) over the plot area.
  function line(u, x, color, dash) {
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = color;
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.setLineDash(dash.map((d) => d * devicePixelRatio));
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
    ctx.restore();
  }

  // triangle marks a culprit at x, at the top of the plot area.
  function triangle(u, x, color) {
    const ctx = u.ctx, s = 7 * devicePixelRatio, y = u.bbox.top;
    ctx.save();
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.moveTo(x - s, y);
    ctx.lineTo(x + s, y);
    ctx.lineTo(x, y + 1.6 * s);
    ctx.closePath();
    ctx.fill();
    ctx.restore();
  }

  function width(box) { return Math.max(320, box.clientWidth || 900); }

  // The nightly series chart.
  function seriesChart() {
    const data = $("series-data"), box = $("chart"), hover = $("hover");
    if (!data || !box) return;
    const d = JSON.parse(data.textContent), N = d.nights;
    const show = (i) => {
      if (i == null || !N[i]) return;
      const n = N[i];
      hover.dataset.commit = n.commit;
      hover.dataset.index = i;
      hover.textContent = `commit ${short(n.commit)} · ${day(n.time)} · median ${fmt(n.median)} · spread ${pct(n.spread)} ` +
        `(quartiles ${fmt(n.q1)}–${fmt(n.q3)}, range ${fmt(n.min)}–${fmt(n.max)}, n=${n.n}) · click for the night's samples`;
    };
    const marks = (u) => {
      for (const cp of d.change_points) {
        if (cp.index <= 0 || cp.index >= N.length) continue;
        const t = (N[cp.index - 1].time + N[cp.index].time) / 2;
        line(u, u.valToPos(t, "x", true), "#ff7f0e", [6, 4]);
      }
      for (const c of d.culprits) {
        if (N[c.index]) triangle(u, u.valToPos(N[c.index].time, "x", true), "#d62728");
      }
    };
    const u = new uPlot({
      width: width(box), height: 360,
      legend: { show: false },
      cursor: { points: { size: 9 } },
      scales: { x: { time: true } },
      axes: [{}, { label: d.metric, size: 70 }],
      series: [{},
        { label: "q1", stroke: "rgba(31,119,180,0.35)", points: { show: false } },
        { label: "q3", stroke: "rgba(31,119,180,0.35)", points: { show: false } },
        { label: "median", stroke: "#1f77b4", width: 2, points: { show: true, size: 5 } }],
      bands: [{ series: [2, 1], fill: "rgba(31,119,180,0.12)" }],
      hooks: { setCursor: [(u) => show(u.cursor.idx)], draw: [marks] },
    }, [N.map((n) => n.time), N.map((n) => n.q1), N.map((n) => n.q3), N.map((n) => n.median)], box);
    u.over.addEventListener("click", () => {
      const i = u.cursor.idx;
      if (i == null) return;
      const q = new URLSearchParams({ scenario: d.scenario, metric: d.metric, point: d.point });
      location.href = `/nights/${N[i].nightly_id}?${q}`;
    });
    window.pgbChart = u;
  }

  // The bisection chart: the median (and range) of every measured commit.
  let bchart = null;
  function bisectionChart() {
    const data = $("bisection-data"), box = $("bchart"), hover = $("bhover");
    if (bchart) { bchart.destroy(); bchart = null; }
    if (!data || !box) return;
    const d = JSON.parse(data.textContent);
    if (!d.index || d.index.length === 0) { box.textContent = "Nothing measured yet."; return; }
    const show = (i) => {
      if (i == null || d.commit[i] == null) return;
      hover.dataset.commit = d.commit[i];
      hover.textContent = `#${d.index[i]} ${short(d.commit[i])} ${d.subject[i]} · median ${fmt(d.median[i])} ` +
        `(range ${fmt(d.min[i])}–${fmt(d.max[i])}, n=${d.n[i]})`;
    };
    const marks = (u) => { for (const i of d.culprits) line(u, u.valToPos(i, "x", true), "#d62728", [2, 3]); };
    bchart = new uPlot({
      width: width(box), height: 300,
      legend: { show: false },
      scales: { x: { time: false } },
      axes: [{ label: "commit (oldest first)" }, { label: d.metric, size: 70 }],
      series: [{},
        { label: "min", stroke: "rgba(214,39,40,0.3)", points: { show: false } },
        { label: "max", stroke: "rgba(214,39,40,0.3)", points: { show: false } },
        { label: "median", stroke: "#d62728", width: 2, points: { show: true, size: 6 } }],
      bands: [{ series: [2, 1], fill: "rgba(214,39,40,0.1)" }],
      hooks: { setCursor: [(u) => show(u.cursor.idx)], draw: [marks] },
    }, [d.index, d.min, d.max, d.median], box);
    window.pgbBisectionChart = bchart;
  }

  // follow streams a bisection's job events into the page, reloading the
  // changing part of the page on each.
  function follow() {
    const list = $("events"), live = $("live"), status = $("stream");
    if (!list || !live) return;
    // A finished bisection's page follows nothing.
    if (list.dataset.ended !== undefined) { status.textContent = "ended"; status.dataset.state = "ended"; return; }
    const id = live.dataset.id, stream = list.dataset.job;
    // One reload at a time; events arriving meanwhile cause one more.
    // data-loaded is the last event the shown state includes.
    let busy = false, again = false, latest = 0;
    const reload = () => {
      if (busy) { again = true; return; }
      busy = true;
      const seq = latest;
      fetch(`/bisections/${encodeURIComponent(id)}/live`)
        .then((r) => r.ok ? r.text() : Promise.reject(new Error(`HTTP ${r.status}`)))
        .then((html) => { live.innerHTML = html; bisectionChart(); live.dataset.loaded = String(seq); })
        .catch((e) => { status.textContent = `reload failed: ${e.message}`; })
        .finally(() => { busy = false; if (again) { again = false; reload(); } });
    };
    const src = new EventSource(`/events/${encodeURIComponent(stream)}?after=${list.dataset.after}`);
    // The server ends the stream after the job's last event ("done"), and
    // answers a reconnection after it with 204, which closes the source.
    const ended = () => { src.close(); status.textContent = "ended"; status.dataset.state = "ended"; };
    src.onopen = () => { status.textContent = "live"; };
    src.onerror = () => {
      if (src.readyState === EventSource.CLOSED) ended(); else status.textContent = "reconnecting…";
    };
    src.onmessage = (m) => {
      const ev = JSON.parse(m.data);
      if (ev.kind === "done") ended();
      const li = document.createElement("li");
      const at = document.createElement("span"), kind = document.createElement("b");
      at.className = "at"; at.textContent = ev.at;
      kind.textContent = ev.kind;
      li.append(at, " ", kind, " " + ev.text);
      list.append(li);
      list.dataset.after = ev.seq;
      latest = ev.seq;
      reload();
    };
    window.addEventListener("pagehide", () => src.close());
  }

  // The overview's running jobs show their latest event (after the one
  // shown, when the page has it).
  function followJobs() {
    for (const el of document.querySelectorAll(".live-job")) {
      const src = new EventSource(`/events/${encodeURIComponent(el.dataset.job)}?after=${el.dataset.after || 0}`);
      src.onmessage = (m) => {
        const ev = JSON.parse(m.data);
        el.textContent = `${ev.kind}: ${ev.text}`;
        if (ev.kind === "done") src.close(); // the job's last event
      };
      window.addEventListener("pagehide", () => src.close());
    }
  }

  seriesChart();
  bisectionChart();
  follow();
  followJobs();
})();
