// Debian's Chromium, headless (software WebGL2 through SwiftShader: no GPU), as the browser
// tests and benches launch it with playwright-core.
const { chromium } = require('playwright-core');

const launch = () => chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});

// A 1200×700 page of `browser` on `at` once the viewer drew its first frame, its page errors
// pushed to `errors`.
const openPage = async (browser, at, errors, timeout = 60000) => {
  const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(at);
  await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout });
  return page;
};

module.exports = { launch, openPage };
