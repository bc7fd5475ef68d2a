// The browser viewer over loopback: `memviz serve` on the archives' folder, headless Chromium
// (software WebGL2, as in CI) opening web/index.html on each. Per archive, three runs of: the time
// from navigation to the first frame drawn (download and wasm start-up included; for an archive the
// page previews, its first-frame parts fetched, then the whole archive's frame); then, in the
// last run, the frame times while panning — the wheel zooms in at the plot's centre, the mouse
// drags it left and right for 150 moves — as the intervals between the page's animation frames
// (p50 / p99 / max; a frame the viewer blocks shows as a long interval).
//
//   npm install playwright-core            # once, anywhere on NODE_PATH
//   memviz serve --port 8091 DIR &          # DIR holds the archives
//   node benches/browser.js 8091 gpt2_small.memviz scale_2m7.memviz
//   # W=800 H=450: a smaller viewport; ZOOM=0: pan without zooming in first; PAN=0: no panning;
//   # MBPS=100: the page's link throttled to 100 Mbit/s down (Chromium's network emulation, 20 ms)
const { chromium } = require('playwright-core');

// The `q` quantile of `xs` (sorted in place).
const quantile = (xs, q) => xs.sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

(async () => {
  const [port, ...archives] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  for (const name of archives) {
    const times = [], wholes = [], steps = [];
    let pan = '', parts = '';
    for (let run = 0; run < 3; run++) {
      const page = await browser.newPage({ viewport: { width: Number(process.env.W ?? 1600), height: Number(process.env.H ?? 900) } });
      if (process.env.MBPS) {
        const cdp = await page.context().newCDPSession(page);
        const bytes = Number(process.env.MBPS) * 1e6 / 8;
        await cdp.send('Network.emulateNetworkConditions',
          { offline: false, latency: 20, downloadThroughput: bytes, uploadThroughput: bytes });
      }
      await page.goto(`http://127.0.0.1:${port}/web/index.html?archive=/archive/0/${name}`);
      await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout: 300000 });
      times.push(Math.round(await page.evaluate('window.memvizFirstFrameMs')));
      // Where the first frame's time went: the page's marks (ms since navigation).
      const marks = await page.evaluate(() => performance.getEntriesByType('mark').map((m) => `${m.name} ${Math.round(m.startTime)}`));
      steps.push(marks.join(', '));
      const preview = await page.evaluate('window.memvizPreviewBytes ?? 0');
      if (preview) {
        // A preview: the whole archive replaces it once the rest is in.
        await page.waitForFunction('window.memvizWholeMs !== undefined', null, { timeout: 300000 });
        wholes.push(Math.round(await page.evaluate('window.memvizWholeMs')));
        parts = ` (a preview of ${(preview / 1e6).toFixed(1)} MB; the whole archive's at ${wholes.join(', ')} ms)`;
      }
      if (run === 2 && process.env.PAN !== '0') {
        await page.waitForTimeout(3000); // what the first frame left to work out
        const [left, top, right, bottom] = await page.evaluate('window.memviz.plot_rect()');
        const [x, y] = [(left + right) / 2, (top + bottom) / 2];
        await page.mouse.move(x, y);
        for (let i = 0; i < Number(process.env.ZOOM ?? 10); i++) await page.mouse.wheel(0, -200);
        await page.waitForTimeout(1000);
        await page.evaluate(() => {
          window.frameGaps = [];
          let last = performance.now();
          const tick = (now) => { window.frameGaps.push(now - last); last = now; if (window.panning) requestAnimationFrame(tick); };
          window.panning = true;
          requestAnimationFrame(tick);
        });
        const frames0 = Number(await page.evaluate('Number(window.memviz.frames())'));
        const t0 = Date.now();
        await page.mouse.down();
        for (let i = 0; i < 150; i++) await page.mouse.move(x + 300 * Math.sin(i / 12), y);
        await page.mouse.up();
        const took = Date.now() - t0;
        await page.evaluate('window.panning = false');
        const gaps = await page.evaluate('window.frameGaps');
        const drawn = Number(await page.evaluate('Number(window.memviz.frames())')) - frames0;
        pan = `; panning: ${drawn} frames in ${took} ms (${(took / drawn).toFixed(1)} ms a frame), animation-frame gaps p50 ${quantile(gaps, 0.5).toFixed(1)} / p99 ${quantile(gaps, 0.99).toFixed(1)} / max ${Math.max(...gaps).toFixed(1)} ms`;
      }
      await page.close();
    }
    console.log(`${name}: first frame ${times.join(', ')} ms${parts}${pan}`);
    console.log(`  marks: ${steps.join(' | ')}`);
  }
  await browser.close();
})();
