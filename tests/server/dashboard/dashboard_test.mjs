// Drives Debian's chromium (headless, through puppeteer-core) against a running `tarmac serve`
// with API keys on, and checks GET /dashboard: the page asks for a key, a wrong key gets a clear
// message, the right one shows the data; under a little load (requests in two buckets) the
// charts draw lines, and the bucket table has exactly the buckets and numbers /metrics reports;
// no console errors beyond the expected 401 of the wrong key and the 404 of a missing /v1/slo.
// Saves a screenshot.
//
// Usage: node dashboard_test.mjs BASE_URL MODEL KEY SCREENSHOT.png   (CHROMIUM: the browser)
import puppeteer from 'puppeteer-core';

const [base, model, key, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node dashboard_test.mjs BASE_URL MODEL KEY SCREENSHOT.png');
  process.exit(2);
}
const failures = [];
function check(cond, what) {
  if (!cond) failures.push(what);
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
}

// The same key the page builds: every label but quantile, in the server's order.
function bucketKey(labels) {
  return Object.entries(labels).filter(([k]) => k !== 'quantile').map(([k, v]) => k + '=' + v).join('|');
}
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = line.match(/^([^{ ]+)(?:\{(.*)\})? (\S+)/);
    if (!m) continue;
    const labels = {};
    for (const lm of (m[2] || '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    out.push({name: m[1], labels, value: parseFloat(m[3])});
  }
  return out;
}

async function complete(body) {
  const r = await fetch(base + '/v1/completions', {
    method: 'POST', headers: {'Content-Type': 'application/json', Authorization: 'Bearer ' + key},
    body: JSON.stringify({model, max_tokens: 24, ...body}),
  });
  if (r.status !== 200) throw new Error('completion answered ' + r.status + ': ' + (await r.text()));
  await r.json();
}

// 24 requests, 4 at a time, in two buckets: greedy and temperature 0.8.
async function load() {
  const jobs = [];
  for (let i = 0; i < 24; i++) jobs.push({prompt: 'Prince Andrew looked at ' + i, temperature: i % 2 ? 0.8 : 0, seed: i});
  const workers = [];
  for (let w = 0; w < 4; w++) {
    workers.push((async () => {
      while (jobs.length) await complete(jobs.shift());
    })());
  }
  await Promise.all(workers);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
});
let exitCode = 1;
try {
  const page = await browser.newPage();
  await page.setViewport({width: 1500, height: 1300});
  const consoleErrors = [];
  let wrongKeyPhase = true;
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const url = (msg.location() && msg.location().url) || '';
    if (wrongKeyPhase && url.endsWith('/metrics') && msg.text().includes('401')) return;  // the wrong key's answer
    if (url.endsWith('/v1/slo') && msg.text().includes('404')) return;  // a server without the SLO report
    consoleErrors.push(msg.text() + ' (' + url + ')');
  });
  page.on('pageerror', (e) => consoleErrors.push('page error: ' + e.message));
  page.on('requestfailed', (r) => consoleErrors.push('request failed: ' + r.url() + ' ' + (r.failure() || {}).errorText));

  const resp = await page.goto(base + '/dashboard', {waitUntil: 'load'});
  check(resp.status() === 200, 'GET /dashboard answers 200 without a key');

  // No key yet: the page asks for one.
  await page.waitForSelector('#key-form:not([hidden])', {timeout: 10000});
  check(await page.$eval('#main', (e) => e.hidden), 'without a key no data is shown');

  // A wrong key: a clear message, still no data.
  await page.type('#key', 'sk-not-the-key');
  await page.click('#key-submit');
  await page.waitForFunction(() => !document.getElementById('error').hidden, {timeout: 10000});
  const wrong = await page.$eval('#error', (e) => e.textContent);
  check(/API key was refused/.test(wrong) && /incorrect API key/.test(wrong), 'a wrong key shows a clear message: "' + wrong + '"');
  check(await page.$eval('#main', (e) => e.hidden), 'a wrong key shows no data');
  check(await page.$eval('#key-form', (e) => !e.hidden), 'a wrong key asks again');
  await new Promise((r) => setTimeout(r, 300));
  wrongKeyPhase = false;

  // The right key: data, and the key kept in session storage.
  await page.type('#key', key);
  await page.click('#key-submit');
  await page.waitForFunction(() => window.tarmacDashboard.polls >= 1 && !document.getElementById('main').hidden, {timeout: 10000});
  check(await page.$eval('#error', (e) => e.hidden), 'the right key clears the message');
  check((await page.evaluate(() => sessionStorage.getItem('tarmac.apiKey'))) === key, 'the key is kept in session storage');

  // Under load: tokens/s above zero in the models table's history (what the throughput chart draws).
  await load();
  const p1 = await page.evaluate(() => window.tarmacDashboard.polls);
  await page.waitForFunction((p) => window.tarmacDashboard.polls >= p + 1, {timeout: 10000}, p1);
  const maxRate = await page.evaluate((m) => Math.max(0, ...(window.tarmacDashboard.history.throughput[m] || []).filter((v) => v !== null)), model);
  check(maxRate > 0, `the page measured output tokens/s under load (max ${maxRate.toFixed(1)})`);
  check(await page.$(`#models tr[data-model="${model}"] td[data-field="throughput"]`) !== null, 'the models table has the model\'s throughput');

  // Two more polls after the load: the page shows what /metrics says now.
  const p0 = await page.evaluate(() => window.tarmacDashboard.polls);
  await page.waitForFunction((p) => window.tarmacDashboard.polls >= p + 2, {timeout: 10000}, p0);
  const metricsResp = await fetch(base + '/metrics', {headers: {Authorization: 'Bearer ' + key}});
  const samples = parseMetrics(await metricsResp.text());
  const expected = new Map();  // bucket key -> {field: value}
  const fields = {'tarmac:window_time_to_first_token_seconds': 'ttft', 'tarmac:window_time_per_output_token_seconds': 'tpot'};
  const qname = {'0.5': 'p50', '0.95': 'p95', '0.99': 'p99'};
  for (const s of samples) {
    if (fields[s.name] && s.labels.quantile) {
      const k = bucketKey(s.labels);
      if (!expected.has(k)) expected.set(k, {});
      expected.get(k)[fields[s.name] + '_' + qname[s.labels.quantile]] = s.value;
    }
    if (s.name === 'tarmac:e2e_request_latency_seconds_count') {
      const k = bucketKey(s.labels);
      if (!expected.has(k)) expected.set(k, {});
      expected.get(k).requests = s.value;
    }
  }
  const shown = await page.evaluate(() => {
    const out = {};
    for (const tr of document.querySelectorAll('#buckets tbody tr')) {
      const row = {};
      for (const td of tr.querySelectorAll('td[data-field]')) row[td.dataset.field] = td.dataset.value === undefined ? td.textContent : parseFloat(td.dataset.value);
      out[tr.dataset.bucket] = row;
    }
    return out;
  });
  const expectedKeys = [...expected.keys()].sort();
  const shownKeys = Object.keys(shown).sort();
  check(expectedKeys.length >= 2, `/metrics has at least two buckets (${expectedKeys.length})`);
  check(JSON.stringify(expectedKeys) === JSON.stringify(shownKeys),
        `the bucket table has the rows /metrics reports (${shownKeys.length} rows)` +
        (JSON.stringify(expectedKeys) === JSON.stringify(shownKeys) ? '' : `: page ${JSON.stringify(shownKeys)} vs ${JSON.stringify(expectedKeys)}`));
  let mismatches = [];
  let requestsShown = 0;
  for (const [k, want] of expected) {
    const got = shown[k] || {};
    for (const [f, v] of Object.entries(want)) {
      if (!(Math.abs((got[f] ?? NaN) - v) <= 1e-9 * Math.max(1, Math.abs(v)))) mismatches.push(`${k} ${f}: page ${got[f]} vs /metrics ${v}`);
    }
    requestsShown += got.requests || 0;
  }
  check(mismatches.length === 0, 'every bucket\'s TTFT/TPOT p50/p95/p99 and request count equal /metrics' +
        (mismatches.length ? ': ' + mismatches.slice(0, 5).join('; ') : ''));
  check(requestsShown >= 24, `the buckets count the load's 24 requests (${requestsShown})`);

  // The charts drew their series: pixels of the first series' colour (#1f77b4) on each canvas.
  const pixels = await page.evaluate(() => {
    const out = {};
    for (const id of ['chart-throughput', 'chart-requests', 'chart-kv']) {
      const c = document.querySelector('#' + id + ' canvas');
      if (!c) { out[id] = -1; continue; }
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - 31) < 24 && Math.abs(d[i + 1] - 119) < 24 && Math.abs(d[i + 2] - 180) < 24 && d[i + 3] > 128) n++;
      out[id] = n;
    }
    return out;
  });
  for (const [id, n] of Object.entries(pixels)) check(n > 50, `${id} draws its series (${n} pixels of the line colour)`);
  check(await page.$eval('#routes-section', (e) => e.hidden), 'no routes configured: the routes section is hidden');

  await page.screenshot({path: screenshot, fullPage: true});
  console.log('screenshot: ' + screenshot);
  check(consoleErrors.length === 0, 'no console errors' + (consoleErrors.length ? ': ' + consoleErrors.join('; ') : ''));
  exitCode = failures.length === 0 ? 0 : 1;
} catch (e) {
  console.error('FAIL ' + (e.stack || e));
  exitCode = 1;
} finally {
  await browser.close();
}
console.log(failures.length === 0 && exitCode === 0 ? 'dashboard: all checks passed' : `dashboard: ${failures.length} check(s) failed or an error stopped the checks`);
process.exit(exitCode);
