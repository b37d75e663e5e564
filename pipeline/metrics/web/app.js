// outlierd live view: follows /live/events (server-sent events) and draws the scores, the
// threshold and the alerts on a canvas. No library: this file is all of it.
'use strict';
(() => {
  const MAX_POINTS = 200000; // the page's own history (the server keeps the last 8192)
  const MAX_ALERTS = 5000; // the table shows the newest ALERT_ROWS; the chart all in its span
  const ALERT_ROWS = 100;
  const $ = (id) => document.getElementById(id);

  const state = {
    points: [],          // {t, k, s, th, o}, in arrival order
    alerts: [],          // newest first
    models: new Map(),   // version -> model
    keys: new Map(),     // key -> records seen (points and alerts)
    status: null, prev: null,
    clockOffset: 0,      // server clock - this page's clock (ms)
    key: '', span: 300000,
    dirty: true,
  };
  // What the page drew, for tests and for a look from the console.
  window.outlierdLive = { state, pointsDrawn: 0, alertsDrawn: 0, events: 0 };

  // Non-finite scores come as "Infinity", "-Infinity" or "NaN".
  const num = (v) => (typeof v === 'number' ? v : Number(v));
  const fmt = (v, digits = 3) => {
    if (v === Infinity) return '∞';
    if (v === -Infinity) return '-∞';
    if (Number.isNaN(v)) return 'NaN';
    if (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3)) return v.toExponential(2);
    return Number(v.toPrecision(digits)).toString();
  };
  const count = (v) => {
    if (v >= 1e9) return (v / 1e9).toFixed(2) + 'G';
    if (v >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (v >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return String(Math.round(v));
  };
  const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
  const ago = (s) => (s < 90 ? Math.round(s) + ' s' : s < 5400 ? Math.round(s / 60) + ' min' : (s / 3600).toFixed(1) + ' h');
  const now = () => Date.now() + state.clockOffset;
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  function seeKey(k) {
    if (!k || state.keys.has(k)) {
      if (k) state.keys.set(k, state.keys.get(k) + 1);
      return;
    }
    state.keys.set(k, 1);
    const sel = $('key');
    const opt = el('option', '', k);
    opt.value = k;
    // Keep the options sorted (naturally: sensor-2 before sensor-10).
    const after = [...sel.options].slice(1).find((o) => o.value.localeCompare(k, undefined, { numeric: true }) > 0);
    sel.insertBefore(opt, after || null);
  }

  function reset() {
    state.points = [];
    state.alerts = [];
    state.models.clear();
    renderAlerts();
    renderModels();
    state.dirty = true;
  }

  // ---- events ----
  // EventSource reconnects by itself after a dropped stream; a refused one (the pipeline
  // restarting, or too many pages open: 503, or from this client: 429) it gives up on, so the
  // page tries again itself (after the Retry-After the server sends).
  let es;
  function connect() {
    es = new EventSource('/live/events');
    es.onopen = () => {
      // The server sends everything it holds on every (re)connect: start over.
      reset();
      const c = $('conn');
      c.textContent = 'live';
      c.className = 'badge ok';
    };
    es.onerror = () => {
      const c = $('conn');
      c.className = 'badge warn';
      if (es.readyState === EventSource.CLOSED) {
        c.textContent = 'disconnected: retrying in 5 s';
        setTimeout(connect, 5000);
      } else {
        c.textContent = 'reconnecting…';
      }
    };
    listen(es);
  }
  function listen(es) {
    es.addEventListener('points', (e) => {
      window.outlierdLive.events++;
      for (const p of JSON.parse(e.data)) {
        p.s = num(p.s);
        p.th = num(p.th);
        state.points.push(p);
        seeKey(p.k);
      }
      if (state.points.length > MAX_POINTS) state.points.splice(0, state.points.length - MAX_POINTS);
      state.dirty = true;
    });
    es.addEventListener('alerts', (e) => {
      window.outlierdLive.events++;
      const fresh = JSON.parse(e.data);
      for (const a of fresh) {
        a.score = num(a.score);
        a.threshold = num(a.threshold);
        a.values = a.values.map(num);
        seeKey(a.key);
      }
      state.alerts = fresh.reverse().concat(state.alerts).slice(0, MAX_ALERTS);
      renderAlerts();
      state.dirty = true;
    });
    es.addEventListener('models', (e) => {
      window.outlierdLive.events++;
      for (const m of JSON.parse(e.data)) {
        m.w_star = num(m.w_star);
        state.models.set(m.version, m);
      }
      renderModels();
    });
    es.addEventListener('status', (e) => {
      window.outlierdLive.events++;
      const st = JSON.parse(e.data);
      state.clockOffset = st.t - Date.now();
      state.prev = state.status;
      state.status = st;
      renderStatus();
    });
  }
  connect();

  // ---- tiles ----
  function renderStatus() {
    const st = state.status, pr = state.prev;
    const r = $('ready');
    r.textContent = st.ready ? 'ready' : 'not ready: ' + st.not_ready;
    r.title = st.ready ? '/readyz: ready' : '/readyz: ' + st.not_ready;
    r.className = 'badge ' + (st.ready ? 'ok' : 'warn');
    $('device').textContent = st.device;
    if (pr && st.t > pr.t) {
      const dt = (st.t - pr.t) / 1000;
      const out = (st.records_out - pr.records_out) / dt;
      const fl = (st.flagged - pr.flagged) / dt;
      $('t-rate').textContent = count(out);
      $('t-flagged').textContent = fl < 10 ? fl.toFixed(1) : count(fl);
      $('t-flagged-sub').textContent = 'outliers/s · ' + (st.records_out > 0 ? (100 * st.flagged / st.records_out).toFixed(2) : '0') + '% overall';
    }
    if (st.lag === null || st.lag === undefined) {
      $('t-lag').textContent = '—';
      $('t-lag-sub').textContent = 'not polled yet';
    } else {
      $('t-lag').textContent = count(st.lag);
      const parts = Object.entries(st.lag_partitions || {});
      $('t-lag-sub').textContent = 'records behind · ' + parts.length + ' partition' + (parts.length === 1 ? '' : 's');
      $('t-lag').title = parts.map(([p, l]) => (st.topic || '') + '/' + p + ': ' + l).join('\n');
    }
    if (st.model_version > 0) {
      $('t-model').textContent = 'v' + st.model_version;
      $('t-model-sub').textContent = 'built ' + ago(st.model_age_s) + ' ago';
    }
    $('t-window').textContent = count(st.window_records);
    $('t-window-sub').textContent = st.window_capacity > 0
      ? 'of ' + count(st.window_capacity) + ' (' + Math.round(100 * st.window_records / st.window_capacity) + '%)' : 'records held';
    $('t-dead').textContent = count(st.dead_letters);
  }

  // ---- tables ----
  function renderAlerts() {
    const body = $('alerts').tBodies[0];
    body.replaceChildren();
    const shown = state.alerts.filter((a) => !state.key || a.key === state.key).slice(0, ALERT_ROWS);
    for (const a of shown) {
      const tr = el('tr');
      tr.dataset.key = a.key;
      tr.dataset.id = a.id;
      if (state.key && a.key === state.key) tr.className = 'sel';
      tr.append(el('td', '', clock(a.t)), el('td', '', a.key || '(no key)'));
      const sc = el('td');
      // The relation as it is: a record the alarm's deadband held (detect.flag_clear) is
      // flagged below the threshold; NaN (no ranking part) is neither.
      const rel = a.score >= a.threshold ? ' ≥ ' : a.score < a.threshold ? ' < ' : ' vs ';
      sc.append(el('span', 'score', fmt(a.score)), document.createTextNode(rel + fmt(a.threshold)));
      tr.append(sc);
      const why = el('td', 'why', a.explanation);
      // A derived mean or std still warming (its window filling) shows its partial window's
      // value, marked: a warming std's 0 is not a stuck sensor.
      const warm = new Set(a.warming || []);
      const vals = a.features.map((f, j) => f + ' ' + fmt(a.values[j], 4) + (warm.has(f) ? ' (warming)' : '')).join(' · ');
      why.append(el('div', 'vals', vals + ' · model v' + a.model + ' · ' + a.id));
      tr.append(why);
      tr.onclick = () => selectKey(a.key);
      body.append(tr);
    }
    $('alerts-empty').textContent = shown.length ? '' : (state.key ? 'No alert for this key yet.' : 'No record flagged yet.');
    $('alert-count').textContent = state.alerts.length ? state.alerts.length + (state.alerts.length === MAX_ALERTS ? '+' : '') + ' since this page opened' : '';
  }

  function renderModels() {
    const body = $('models').tBodies[0];
    body.replaceChildren();
    const ms = [...state.models.values()].sort((a, b) => b.version - a.version).slice(0, 20);
    for (const m of ms) {
      const tr = el('tr');
      tr.dataset.version = m.version;
      tr.append(el('td', '', 'v' + m.version), el('td', '', clock(m.since)),
        el('td', '', m.build_ms < 1000 ? m.build_ms.toFixed(0) + ' ms' : (m.build_ms / 1000).toFixed(2) + ' s'),
        el('td', '', count(m.window_records)), el('td', '', m.w_star ? fmt(m.w_star) : '—'));
      body.append(tr);
    }
    $('models-empty').textContent = ms.length ? '' : 'No model yet: the pipeline holds records until the window has detect.min_records.';
  }

  function selectKey(k) {
    state.key = k;
    $('key').value = k;
    renderAlerts();
    state.dirty = true;
  }
  $('key').onchange = (e) => selectKey(e.target.value);
  $('span').onchange = (e) => { state.span = Number(e.target.value); state.dirty = true; };

  // ---- chart ----
  const canvas = $('chart');
  const ctx = canvas.getContext('2d');
  const css = getComputedStyle(document.documentElement);
  const color = (v) => css.getPropertyValue(v).trim();

  function niceStep(range, ticks) {
    const raw = range / ticks, p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const L = 48, R = 16, T = 14, B = 24;
    const t1 = now();
    // The span, or less while the page has less: the chart fills its width from the start.
    const first = state.points.length ? state.points[0].t : t1;
    const t0 = Math.max(t1 - state.span, Math.min(first, t1 - 10000));
    const pts = state.points.filter((p) => p.t >= t0 && (!state.key || p.k === state.key));
    const alerts = state.alerts.filter((a) => a.t >= t0 && (!state.key || a.key === state.key));
    // The score axis follows the bulk, not the extremes: up to the largest of 1.5x the
    // threshold, the 99.5th percentile of the sampled scores and the 95th of the alerts'; a
    // score above it (a spike can score 10,000 where the threshold is 2) is drawn at the top as
    // a triangle, with its value when far beyond.
    const quantile = (vs, q) => { // of at most 5,000 evenly spaced values: a redraw stays cheap
      const step = Math.max(1, Math.floor(vs.length / 5000)), f = [];
      for (let i = 0; i < vs.length; i += step) if (Number.isFinite(vs[i])) f.push(vs[i]);
      f.sort((a, b) => a - b);
      return f.length ? f[Math.min(f.length - 1, Math.floor(q * f.length))] : 0;
    };
    const finite = pts.filter((p) => Number.isFinite(p.s)).length;
    let ymax = 1.1 * Math.max(quantile(pts.map((p) => p.s), 0.995), quantile(alerts.map((a) => a.score), 0.95));
    for (const p of pts) {
      if (Number.isFinite(p.th)) ymax = Math.max(ymax, 1.5 * p.th);
    }
    if (!(ymax > 0)) ymax = 1;
    const x = (t) => L + (w - L - R) * (t - t0) / (t1 - t0);
    const y = (s) => (s > ymax ? T : T + (h - T - B) * (1 - Math.max(s, 0) / ymax));

    // axes and grid
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = color('--muted');
    ctx.strokeStyle = color('--line');
    ctx.lineWidth = 1;
    const ys = niceStep(ymax, 5);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    for (let v = 0; v <= ymax; v += ys) {
      const yy = Math.round(y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(L, yy); ctx.lineTo(w - R, yy); ctx.stroke();
      ctx.fillText(fmt(v, 2), L - 6, yy);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    const xs = niceStep((t1 - t0) / 1000, 6) * 1000;
    for (let t = Math.ceil(t0 / xs) * xs; t <= t1; t += xs) {
      const xx = Math.round(x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(xx, T); ctx.lineTo(xx, h - B); ctx.stroke();
      if (xx > L + 25 && xx < w - R - 25) ctx.fillText(clock(t), xx, h - B + 6);
    }

    // threshold: a step line through the sampled points' thresholds (one per model)
    ctx.strokeStyle = color('--th');
    ctx.setLineDash([6, 4]);
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    let last = null;
    for (const p of pts) {
      if (!Number.isFinite(p.th)) continue;
      if (last === null) ctx.moveTo(x(p.t), y(p.th));
      else if (p.th !== last) { ctx.lineTo(x(p.t), y(last)); ctx.lineTo(x(p.t), y(p.th)); }
      last = p.th;
    }
    if (last !== null) ctx.lineTo(x(t1), y(last));
    ctx.stroke();
    ctx.setLineDash([]);

    // one key: its scores as a line
    if (state.key && pts.length > 1) {
      ctx.strokeStyle = color('--in');
      ctx.globalAlpha = 0.5;
      ctx.lineWidth = 1;
      ctx.beginPath();
      pts.forEach((p, i) => (i ? ctx.lineTo(x(p.t), y(p.s)) : ctx.moveTo(x(p.t), y(p.s))));
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
    // sampled scores
    let drawn = 0;
    for (const p of pts) {
      if (Number.isNaN(p.s)) continue;
      if (p.u) { // over the threshold but not flagged: the alarm cap was spent
        ctx.strokeStyle = color('--out');
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.arc(x(p.t), y(p.s), 3, 0, 2 * Math.PI);
        ctx.stroke();
        drawn++;
        continue;
      }
      ctx.fillStyle = p.o ? color('--out') : color('--in');
      ctx.globalAlpha = p.o ? 1 : (state.key ? 0.9 : 0.45);
      ctx.beginPath();
      ctx.arc(x(p.t), y(p.s), p.o ? 3 : 2, 0, 2 * Math.PI);
      ctx.fill();
      drawn++;
    }
    ctx.globalAlpha = 1;
    // every flagged record: a diamond (a triangle at the top, with its score, when the score is
    // beyond the axis)
    let alertsDrawn = 0;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    for (const a of alerts) {
      if (Number.isNaN(a.score)) continue;
      const ax = x(a.t), ay = y(a.score), over = a.score > ymax;
      ctx.fillStyle = color('--out');
      ctx.strokeStyle = '#fff';
      ctx.beginPath();
      if (over) {
        ctx.moveTo(ax, ay - 6); ctx.lineTo(ax - 5, ay + 3); ctx.lineTo(ax + 5, ay + 3);
      } else {
        ctx.moveTo(ax, ay - 5); ctx.lineTo(ax + 5, ay); ctx.lineTo(ax, ay + 5); ctx.lineTo(ax - 5, ay);
      }
      ctx.closePath();
      ctx.fill();
      ctx.lineWidth = 0.75;
      ctx.stroke();
      if (over && a.score > 3 * ymax) {
        ctx.fillStyle = color('--text');
        ctx.fillText(fmt(a.score) + (a.key ? ' ' + a.key : ''), Math.min(ax + 7, w - R - 90), ay);
      }
      alertsDrawn++;
    }
    canvas.dataset.pointsDrawn = String(drawn);
    canvas.dataset.alertsDrawn = String(alertsDrawn);
    window.outlierdLive.pointsDrawn = drawn;
    window.outlierdLive.alertsDrawn = alertsDrawn;
    const note = $('chart-note');
    if (pts.length && !finite) {
      note.textContent = 'The model has no combined score (detect.score.detectors is empty): only the verdicts are shown.';
    } else if (!state.points.length) {
      note.textContent = state.status && state.status.model_version === 0
        ? 'Waiting for the first model (the window fills to detect.min_records first).' : 'Waiting for scored records…';
    } else {
      note.textContent = '';
    }
  }

  // Redraw when something changed, and at least once a second so the time axis moves (a timer,
  // not animation frames: those stop in a background tab, and the data keeps coming).
  let lastDraw = 0;
  setInterval(() => {
    const t = Date.now();
    if (state.dirty || t - lastDraw >= 1000) {
      state.dirty = false;
      lastDraw = t;
      draw();
    }
  }, 200);
  window.addEventListener('resize', () => { state.dirty = true; });
  renderModels();
  draw();
})();
