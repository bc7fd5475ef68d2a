// The page `memviz export html` writes, opened from file:// in Firefox (Debian's firefox-esr,
// driven by puppeteer-core over WebDriver BiDi; under Xvfb, where Mesa gives it WebGL2 — headless
// Firefox has none without a GPU): wait for the first frame, read the id buffer at a few pixels
// beside what the viewer picks there, and take a screenshot. Prints what it saw as JSON.
//
//   xvfb-run -a node firefox_client.js FILE_URL SHOTS_DIR
const puppeteer = require('puppeteer-core');
const { drawnIds } = require('./drawn_ids');

(async () => {
  const [url, shots] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: '/usr/bin/firefox-esr',
    headless: false,
    extraPrefsFirefox: { 'webgl.force-enabled': true, 'gfx.blocklist.all': -1 },
  });
  const seen = { errors: [] };
  try {
    const page = await browser.newPage();
    page.on('pageerror', (e) => seen.errors.push(String(e)));
    await page.setViewport({ width: 1200, height: 700 });
    await page.goto(url);
    await page.waitForFunction('window.memvizFirstFrameMs !== undefined', { timeout: 60000 });
    seen.first_frame_ms = Math.round(await page.evaluate('window.memvizFirstFrameMs'));
    seen.view = await page.evaluate('window.memviz.view()');
    seen.plot = await page.evaluate('Array.from(window.memviz.plot_rect())');
    seen.drawn = await drawnIds(page, seen.plot);
    await new Promise((r) => setTimeout(r, 1000));
    await page.screenshot({ path: `${shots}/firefox.png` });
  } catch (e) {
    seen.errors.push(String(e));
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})();
