// The viewer in headless Chromium, driven like a user (playwright-core): open the page on an
// archive, wait for the first frame, click an element low in the plot (pinned: the element the
// viewer picks there), then click above the data (unpinned). Prints what it saw as JSON.
//
//   node browser_client.js URL
const { chromium } = require('playwright-core');

(async () => {
  const url = process.argv[2];
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const seen = {};
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout: 60000 });
    seen.first_frame_ms = Math.round(await page.evaluate('window.memvizFirstFrameMs'));
    const [left, top, right, bottom] = await page.evaluate('window.memviz.plot_rect()');
    seen.plot = [left, top, right, bottom];
    const x = (left + right) / 2, low = bottom - 3;
    seen.under = await page.evaluate(([x, y]) => window.memviz.element_at(x, y) ?? null, [x, low]);
    await page.mouse.click(x, low);
    await page.waitForTimeout(300);
    seen.pinned = await page.evaluate('window.memviz.pinned() ?? null');
    await page.mouse.click(x, top + 3);
    await page.waitForTimeout(300);
    seen.after_empty_click = await page.evaluate('window.memviz.pinned() ?? null');
    seen.errors = errors;
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})();
