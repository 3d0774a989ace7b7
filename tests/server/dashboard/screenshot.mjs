// Opens GET /dashboard in Debian's chromium (headless) and saves screenshots while the server is
// busy: node screenshot.mjs BASE_URL OUT.png [KEY] [DELAY_S] [COUNT]. Used by
// bench/dashboard_demo.sh (the closing note's pictures); not a test.
import puppeteer from 'puppeteer-core';

const [base, out, key = '', delay = '8', count = '1'] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await browser.newPage();
await page.setViewport({width: 1500, height: 1200});
if (key) await page.evaluateOnNewDocument((k) => sessionStorage.setItem('tarmac.apiKey', k), key);
await page.goto(base + '/dashboard', {waitUntil: 'load'});
for (let i = 0; i < Number(count); i++) {
  await new Promise((r) => setTimeout(r, Number(delay) * 1000));
  const path = Number(count) > 1 ? out.replace(/\.png$/, `-${i + 1}.png`) : out;
  await page.screenshot({path, fullPage: true});
  console.log('screenshot: ' + path);
}
await browser.close();
