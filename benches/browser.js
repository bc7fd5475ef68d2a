// The browser viewer's first frame over loopback: `memviz serve` on the archives' folder, headless
// Chromium (software WebGL2, as in CI) opening web/index.html on each, the time from navigation
// to the first frame drawn (download and wasm start-up included), three runs each.
//
//   npm install playwright-core            # once, anywhere on NODE_PATH
//   memviz serve --port 8091 DIR &          # DIR holds the archives
//   node benches/browser.js 8091 gpt2_small.memviz scale_2m7.memviz
const { chromium } = require('playwright-core');

(async () => {
  const [port, ...archives] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  for (const name of archives) {
    const times = [];
    for (let run = 0; run < 3; run++) {
      const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
      await page.goto(`http://127.0.0.1:${port}/web/index.html?archive=/archive/0/${name}`);
      await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout: 120000 });
      times.push(Math.round(await page.evaluate('window.memvizFirstFrameMs')));
      await page.close();
    }
    console.log(`${name}: first frame ${times.join(', ')} ms`);
  }
  await browser.close();
})();
