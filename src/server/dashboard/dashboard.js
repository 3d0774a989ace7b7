// tarmac's live dashboard (GET /dashboard). Polls GET /metrics (Prometheus text: the one source
// of every series) every POLL_MS and, when the server has it, GET /v1/slo (the SLO report: tier
// targets, attainment, the controller's state and actions); shows what the server reports and
// hides what it does not. With API keys on, the key is asked for once and kept in this tab's
// session storage; it is sent as "Authorization: Bearer KEY" like any client's.
'use strict';

(function () {
  const POLL_MS = 1000;
  const SLO_RETRY_MS = 30000;   // a server without /v1/slo (404) is asked again this often
  const HISTORY = 300;          // points kept per chart
  const KEY_STORAGE = 'tarmac.apiKey';
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];
  const BUCKET_LABELS = ['prompt_band', 'output_band', 'task', 'sla', 'temperature_band'];

  const $ = (id) => document.getElementById(id);
  const state = {
    polls: 0,            // successful polls (read by the browser test)
    lastError: '',
    prev: null,          // {t, tokens: {model: total}} of the previous poll
    history: {t: [], throughput: {}, running: {}, waiting: {}, kv: {}},
    charts: {},          // name -> {plot, models}
    slo: null,           // the last /v1/slo report, or null
    sloMissingUntil: 0,  // /v1/slo answered 404: do not ask again before this time
  };
  window.tarmacDashboard = state;

  // ---- Prometheus text format --------------------------------------------------------------
  // One sample per line: NAME{l1="v1",...} VALUE. Returns [{name, labels, value}].
  function parseMetrics(text) {
    const out = [];
    for (const line of text.split('\n')) {
      if (line === '' || line[0] === '#') continue;
      let name, labels = {}, rest;
      const brace = line.indexOf('{');
      const space = line.indexOf(' ');
      if (brace >= 0 && brace < space) {
        name = line.slice(0, brace);
        let i = brace + 1;
        while (i < line.length && line[i] !== '}') {
          const eq = line.indexOf('=', i);
          const key = line.slice(i, eq);
          let j = eq + 2, val = '';
          while (j < line.length && line[j] !== '"') {
            if (line[j] === '\\' && j + 1 < line.length) {
              const c = line[j + 1];
              val += c === 'n' ? '\n' : c;
              j += 2;
            } else {
              val += line[j++];
            }
          }
          labels[key] = val;
          i = j + 1;
          if (line[i] === ',') i++;
        }
        rest = line.slice(i + 1).trim();
      } else {
        name = line.slice(0, space);
        rest = line.slice(space + 1).trim();
      }
      const value = parseFloat(rest.split(' ')[0]);
      out.push({name, labels, value});
    }
    return out;
  }

  function byName(samples) {
    const m = new Map();
    for (const s of samples) {
      if (!m.has(s.name)) m.set(s.name, []);
      m.get(s.name).push(s);
    }
    return m;
  }

  // A request bucket's key: the model and every label but quantile, in the order the server
  // writes them (the browser test builds the same key from /metrics).
  function bucketKey(labels) {
    return Object.entries(labels).filter(([k]) => k !== 'quantile').map(([k, v]) => k + '=' + v).join('|');
  }

  // ---- formatting ---------------------------------------------------------------------------
  function fmtMs(seconds) {
    if (seconds === undefined || seconds === null || Number.isNaN(seconds)) return '–';
    const ms = seconds * 1000;
    return (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2)) + ' ms';
  }
  function fmtPct(x) {
    if (x === undefined || x === null || Number.isNaN(x)) return '–';
    return (100 * x).toFixed(1) + '%';
  }
  function fmtNum(x, digits = 0) {
    if (x === undefined || x === null || Number.isNaN(x)) return '–';
    return x.toFixed(digits);
  }
  function cell(text, opts = {}) {
    const td = document.createElement('td');
    td.textContent = text;
    if (opts.label) td.className = 'label';
    if (opts.cls) td.className = opts.cls;
    if (opts.field) td.dataset.field = opts.field;
    if (opts.value !== undefined && opts.value !== null && !Number.isNaN(opts.value)) td.dataset.value = String(opts.value);
    return td;
  }
  function setHead(table, names) {
    const thead = table.tHead;
    const tr = document.createElement('tr');
    for (const n of names) {
      const th = document.createElement('th');
      th.textContent = n;
      tr.appendChild(th);
    }
    thead.replaceChildren(tr);
  }

  // ---- key handling -------------------------------------------------------------------------
  function apiKey() { return sessionStorage.getItem(KEY_STORAGE) || ''; }
  function headers() {
    const k = apiKey();
    return k ? {Authorization: 'Bearer ' + k} : {};
  }
  function showError(msg) {
    state.lastError = msg;
    $('error').textContent = msg;
    $('error').hidden = msg === '';
  }
  function askForKey(refusedMessage) {
    $('main').hidden = true;
    $('key-form').hidden = false;
    $('forget-key').hidden = true;
    $('status').textContent = 'waiting for an API key';
    if (refusedMessage) showError('The API key was refused by the server (' + refusedMessage + '). Enter a valid key.');
    else showError('');
    $('key').focus();
  }
  $('key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = $('key').value.trim();
    if (k === '') return;
    sessionStorage.setItem(KEY_STORAGE, k);
    $('key').value = '';
    $('key-form').hidden = true;
    state.prev = null;
    poll();
  });
  $('forget-key').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORAGE);
    askForKey('');
  });

  // ---- charts ---------------------------------------------------------------------------------
  function pushHistory(t, perModel) {
    const h = state.history;
    h.t.push(t);
    for (const series of ['throughput', 'running', 'waiting', 'kv']) {
      for (const model of Object.keys(perModel)) {
        if (!h[series][model]) h[series][model] = new Array(h.t.length - 1).fill(null);
      }
      for (const model of Object.keys(h[series])) {
        const v = perModel[model] ? perModel[model][series] : null;
        h[series][model].push(v === undefined ? null : v);
      }
    }
    if (h.t.length > HISTORY) {
      h.t.shift();
      for (const series of ['throughput', 'running', 'waiting', 'kv'])
        for (const model of Object.keys(h[series])) h[series][model].shift();
    }
  }

  // name: the chart; lines: [{label, values}] (one per model and series).
  function drawChart(name, lines) {
    const el = $('chart-' + name);
    const signature = lines.map((l) => l.label).join('\n');
    let c = state.charts[name];
    const data = [state.history.t.slice(), ...lines.map((l) => l.values.slice())];
    if (!c || c.signature !== signature) {
      if (c) c.plot.destroy();
      const opts = {
        width: Math.max(420, Math.min(640, el.parentElement.clientWidth || 480)),
        height: 220,
        scales: {x: {time: true}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1]}},
        series: [{}, ...lines.map((l, i) => ({label: l.label, stroke: COLORS[i % COLORS.length], width: 2, dash: l.dash}))],
        axes: [{}, {size: 60}],
        legend: {live: false},
      };
      c = {plot: new uPlot(opts, data, el), signature};
      state.charts[name] = c;
    } else {
      c.plot.setData(data);
    }
  }

  function drawCharts(models) {
    const h = state.history;
    drawChart('throughput', models.map((m) => ({label: m, values: h.throughput[m]})));
    const rw = [];
    for (const m of models) {
      rw.push({label: m + ' running', values: h.running[m]});
      rw.push({label: m + ' waiting', values: h.waiting[m], dash: [6, 4]});
    }
    drawChart('requests', rw);
    drawChart('kv', models.map((m) => ({label: m, values: h.kv[m].map((v) => (v === null ? null : 100 * v))})));
  }

  // ---- tables ---------------------------------------------------------------------------------
  function one(series, model) {
    if (!series) return undefined;
    let sum, found = false;
    for (const s of series) {
      if (s.labels.model_name === model) {
        sum = (sum || 0) + s.value;
        found = true;
      }
    }
    return found ? sum : undefined;
  }

  function renderModels(m, models, now) {
    const tbody = $('models').tBodies[0];
    const rows = [];
    const perModel = {};
    const tokens = {};
    for (const model of models) {
      tokens[model] = one(m.get('tarmac:generation_tokens_total'), model) || 0;
      let rate = null;
      if (state.prev && state.prev.tokens[model] !== undefined && now > state.prev.t)
        rate = Math.max(0, (tokens[model] - state.prev.tokens[model]) / ((now - state.prev.t) / 1000));
      const running = one(m.get('tarmac:num_requests_running'), model);
      const waiting = one(m.get('tarmac:num_requests_waiting'), model);
      const kv = one(m.get('tarmac:kv_cache_usage_perc'), model);
      const frag = one(m.get('tarmac:kv_cache_fragmentation'), model);
      const queries = one(m.get('tarmac:prefix_cache_queries_total'), model);
      const hits = one(m.get('tarmac:prefix_cache_hits_total'), model);
      const preempt = one(m.get('tarmac:num_preemptions_total'), model);
      // Mixtures of experts only (dense models have no such series).
      const loadMax = one(m.get('tarmac:moe_expert_load_max_over_mean'), model);
      const hotShare = one(m.get('tarmac:moe_hot_expert_share'), model);
      const load = loadMax === undefined ? '–'
                 : loadMax === 0 ? 'idle' : `${fmtNum(loadMax, 2)}× · ${fmtPct(hotShare)}`;
      perModel[model] = {throughput: rate, running, waiting, kv};
      const tr = document.createElement('tr');
      tr.dataset.model = model;
      tr.append(cell(model, {label: true}),
                cell(rate === null ? '–' : fmtNum(rate, 1), {field: 'throughput', value: rate}),
                cell(fmtNum(running), {field: 'running', value: running}),
                cell(fmtNum(waiting), {field: 'waiting', value: waiting}),
                cell(fmtPct(kv), {field: 'kv_usage', value: kv}),
                cell(fmtPct(frag), {field: 'kv_fragmentation', value: frag}),
                cell(queries ? fmtPct(hits / queries) : '–', {field: 'prefix_hit_rate', value: queries ? hits / queries : undefined}),
                cell(fmtNum(hits), {field: 'prefill_saved', value: hits}),
                cell(fmtNum(preempt), {field: 'preemptions', value: preempt}),
                cell(load, {field: 'expert_load', value: loadMax}));
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    return {perModel, tokens};
  }

  // The SLO report's bucket for a metrics bucket (by model and labels), and its tier's targets.
  function sloIndex() {
    const idx = {buckets: new Map(), tiers: new Map()};
    const r = state.slo;
    if (!r) return idx;
    for (const t of r.tiers || []) idx.tiers.set(t.name, t);
    for (const model of r.models || []) {
      for (const b of model.buckets || []) {
        let labels = b.labels || {};
        if (Array.isArray(labels)) labels = Object.fromEntries(labels.map((p) => (Array.isArray(p) ? p : [p.name, p.value])));
        idx.buckets.set(bucketKey({model_name: model.model || model.name, ...labels}), b);
      }
    }
    return idx;
  }

  function quantiles(series) {
    const out = new Map();  // key -> {labels, q: {0.5: v, ...}}
    for (const s of series || []) {
      if (s.labels.quantile === undefined) continue;
      const key = bucketKey(s.labels);
      if (!out.has(key)) out.set(key, {labels: s.labels, q: {}});
      out.get(key).q[s.labels.quantile] = s.value;
    }
    return out;
  }

  function sumBy(series) {
    const out = new Map();
    for (const s of series || []) {
      const key = bucketKey(s.labels);
      out.set(key, (out.get(key) || 0) + s.value);
    }
    return out;
  }

  function renderBuckets(m) {
    const ttft = quantiles(m.get('tarmac:window_time_to_first_token_seconds'));
    const tpot = quantiles(m.get('tarmac:window_time_per_output_token_seconds'));
    const requests = sumBy(m.get('tarmac:e2e_request_latency_seconds_count'));
    const drafted = sumBy(m.get('tarmac:spec_decode_num_draft_tokens_total'));
    const accepted = sumBy(m.get('tarmac:spec_decode_num_accepted_tokens_total'));
    const decisions = sumBy(m.get('tarmac:spec_decode_decisions_total'));
    const fallbacks = sumBy(m.get('tarmac:spec_decode_fallbacks_total'));
    const hasSpec = decisions.size > 0;
    const slo = sloIndex();
    const hasSlo = state.slo !== null;
    const head = ['model', 'prompt', 'output', 'task', 'SLA', 'T', 'requests', 'TTFT p50', 'p95', 'p99'];
    if (hasSlo) head.push('TTFT SLO');
    head.push('TPOT p50', 'p95', 'p99');
    if (hasSlo) head.push('TPOT SLO', 'SLO attainment');
    if (hasSpec) head.push('spec acceptance', 'spec fallback');
    setHead($('buckets'), head);
    const keys = [...new Set([...ttft.keys(), ...tpot.keys()])].sort();
    const rows = [];
    for (const key of keys) {
      const labels = (ttft.get(key) || tpot.get(key)).labels;
      const tq = (ttft.get(key) || {q: {}}).q;
      const pq = (tpot.get(key) || {q: {}}).q;
      const sb = slo.buckets.get(key);
      const tier = slo.tiers.get(labels.sla);
      const target = (what) => {
        if (sb && sb.slo && sb.slo[what] !== undefined) return sb.slo[what];
        return tier ? tier[what] : undefined;
      };
      const tr = document.createElement('tr');
      tr.dataset.bucket = key;
      tr.append(cell(labels.model_name, {label: true}));
      for (const l of BUCKET_LABELS) tr.append(cell(labels[l] === undefined ? '' : labels[l], {label: true, field: l}));
      tr.append(cell(fmtNum(requests.get(key)), {field: 'requests', value: requests.get(key)}));
      const quantileCells = (q, prefix, targetMs) => {
        for (const [name, qs] of [['p50', '0.5'], ['p95', '0.95'], ['p99', '0.99']]) {
          let cls;
          if (name === 'p99' && targetMs !== undefined && targetMs !== null && q[qs] !== undefined && !Number.isNaN(q[qs]))
            cls = q[qs] * 1000 <= targetMs ? 'ok' : 'miss';
          tr.append(cell(fmtMs(q[qs]), {field: prefix + '_' + name, value: q[qs], cls}));
        }
      };
      const ttftTarget = target('ttft_ms'), tpotTarget = target('tpot_ms');
      quantileCells(tq, 'ttft', ttftTarget);
      if (hasSlo) tr.append(cell(ttftTarget === undefined || ttftTarget === null ? '–' : ttftTarget + ' ms', {field: 'ttft_slo'}));
      quantileCells(pq, 'tpot', tpotTarget);
      if (hasSlo) {
        tr.append(cell(tpotTarget === undefined || tpotTarget === null ? '–' : tpotTarget + ' ms', {field: 'tpot_slo'}));
        const att = sb && sb.window ? sb.window.slo_attainment : undefined;
        tr.append(cell(fmtPct(att), {field: 'slo_attainment', value: att}));
      }
      if (hasSpec) {
        const d = drafted.get(key) || 0, a = accepted.get(key) || 0;
        const dec = decisions.get(key) || 0, fb = fallbacks.get(key) || 0;
        tr.append(cell(d > 0 ? fmtPct(a / d) : '–', {field: 'spec_acceptance', value: d > 0 ? a / d : undefined}),
                  cell(dec > 0 ? fmtPct(fb / dec) : '–', {field: 'spec_fallback', value: dec > 0 ? fb / dec : undefined}));
      }
      rows.push(tr);
    }
    $('buckets').tBodies[0].replaceChildren(...rows);
  }

  function renderRoutes(m) {
    const series = m.get('tarmac:route_requests_total');
    $('routes-section').hidden = !series;
    if (!series) return;
    const routes = new Map();
    for (const s of series) {
      const r = routes.get(s.labels.route) || {total: 0, models: new Map(), escalated: 0, fallback: 0};
      r.total += s.value;
      r.models.set(s.labels.model_name, (r.models.get(s.labels.model_name) || 0) + s.value);
      if (s.labels.outcome === 'escalated') r.escalated += s.value;
      if (s.labels.outcome === 'fallback') r.fallback += s.value;
      routes.set(s.labels.route, r);
    }
    const rows = [];
    for (const [name, r] of [...routes.entries()].sort()) {
      const mix = [...r.models.entries()].map(([model, n]) => model + ' ' + fmtPct(r.total ? n / r.total : 0)).join(', ');
      const tr = document.createElement('tr');
      tr.dataset.route = name;
      tr.append(cell(name, {label: true}), cell(fmtNum(r.total), {field: 'requests', value: r.total}),
                cell(mix, {label: true, field: 'mix'}),
                cell(r.total ? fmtPct(r.escalated / r.total) : '–', {field: 'escalation_rate', value: r.total ? r.escalated / r.total : undefined}),
                cell(fmtNum(r.fallback), {field: 'fallback', value: r.fallback}));
      rows.push(tr);
    }
    $('routes').tBodies[0].replaceChildren(...rows);
  }

  function renderController() {
    const models = state.slo ? (state.slo.models || []).filter((x) => x.controller) : [];
    $('controller-section').hidden = models.length === 0;
    if (models.length === 0) return;
    const rows = [];
    const actions = [];
    for (const model of models) {
      const c = model.controller;
      // measures: {measure: reason} (GET /v1/slo's controller object).
      const m = c.measures || {};
      const measures = Array.isArray(m) ? m.map(String) : Object.entries(m).map(([name, reason]) => name + (reason ? ' (' + reason + ')' : ''));
      const tr = document.createElement('tr');
      tr.append(cell(model.model || model.name, {label: true}), cell(String(c.state), {field: 'state'}),
                cell(c.state_for_s === undefined ? '–' : fmtNum(c.state_for_s, 0) + ' s'),
                cell(measures.join(', ') || 'none', {label: true}));
      rows.push(tr);
      for (const a of c.recent_actions || []) actions.push({model: model.model || model.name, a});
    }
    $('controller').tBodies[0].replaceChildren(...rows);
    const items = actions.slice(-12).reverse().map(({model, a}) => {
      const li = document.createElement('li');
      const when = typeof a.ago_s === 'number' ? fmtNum(a.ago_s, 1) + ' s ago: ' : '';
      li.textContent = when + model + ': ' + (a.action || '?') + (a.reason ? ' (' + a.reason + ')' : '') +
                       (a.state ? ' [' + a.state + ']' : '') + (a.detail ? ' ' + a.detail : '');
      return li;
    });
    $('actions').replaceChildren(...items);
  }

  function renderHttp(m) {
    const rows = [];
    for (const s of (m.get('tarmac:http_requests_total') || []).slice().sort((a, b) => (a.labels.route + a.labels.code).localeCompare(b.labels.route + b.labels.code))) {
      const tr = document.createElement('tr');
      tr.append(cell(s.labels.route, {label: true}), cell(s.labels.code), cell(fmtNum(s.value)));
      rows.push(tr);
    }
    $('http').tBodies[0].replaceChildren(...rows);
    const rej = [];
    for (const s of m.get('tarmac:requests_rejected_total') || []) {
      const tr = document.createElement('tr');
      tr.append(cell(s.labels.reason, {label: true}), cell(fmtNum(s.value)));
      rej.push(tr);
    }
    $('rejected').tBodies[0].replaceChildren(...rej);
    $('rejected').hidden = rej.length === 0;
  }

  // ---- polling --------------------------------------------------------------------------------
  async function errorMessage(resp) {
    try {
      const j = await resp.json();
      if (j && j.error && j.error.message) return j.error.message;
    } catch (e) { /* not JSON */ }
    return 'HTTP ' + resp.status;
  }

  async function fetchSlo(now) {
    if (now < state.sloMissingUntil) return;
    try {
      const resp = await fetch('/v1/slo', {headers: headers(), cache: 'no-store'});
      if (resp.status === 404) {
        state.slo = null;
        state.sloMissingUntil = now + SLO_RETRY_MS;
        return;
      }
      if (!resp.ok) return;  // 401s are reported by /metrics
      state.slo = await resp.json();
    } catch (e) {
      state.slo = null;
    }
  }

  let timer = null;
  async function poll() {
    if (timer) clearTimeout(timer);
    timer = null;
    let resp;
    try {
      resp = await fetch('/metrics', {headers: headers(), cache: 'no-store'});
    } catch (e) {
      showError('Cannot reach the server (' + e.message + '); retrying.');
      $('status').textContent = 'disconnected';
      timer = setTimeout(poll, POLL_MS);
      return;
    }
    if (resp.status === 401) {
      const msg = await errorMessage(resp);
      if (apiKey()) {
        sessionStorage.removeItem(KEY_STORAGE);
        askForKey(msg);
      } else {
        askForKey('');
      }
      return;  // polling resumes when a key is entered
    }
    if (!resp.ok) {
      showError('GET /metrics answered ' + resp.status + ': ' + (await errorMessage(resp)) + '; retrying.');
      timer = setTimeout(poll, POLL_MS);
      return;
    }
    const text = await resp.text();
    const now = Date.now();
    await fetchSlo(now);
    const m = byName(parseMetrics(text));
    const models = [...new Set((m.get('tarmac:num_requests_running') || []).map((s) => s.labels.model_name))].sort();
    $('main').hidden = false;
    $('forget-key').hidden = apiKey() === '';
    showError('');
    const {perModel, tokens} = renderModels(m, models, now);
    pushHistory(now / 1000, perModel);
    drawCharts(models);
    renderBuckets(m);
    renderRoutes(m);
    renderController();
    renderHttp(m);
    state.prev = {t: now, tokens};
    state.polls++;
    $('status').textContent = 'updated ' + new Date(now).toLocaleTimeString() + ' · every ' + POLL_MS / 1000 + ' s' +
                              (state.slo ? ' · SLO report on' : '');
    timer = setTimeout(poll, POLL_MS);
  }

  poll();
})();
