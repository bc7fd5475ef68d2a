// What a frame costs in the browser per view, and how much of it is the page's script: the same
// 60-move drag over the page on each view named, with Chromium's Performance.getMetrics read
// before and after (TaskDuration: the page's thread busy, ScriptDuration: running script — the
// wasm among it), per frame the viewer drew.
//
//   memviz serve --port 8091 DIR &
//   NODE_PATH=… node benches/browser_views.js 8091 scale_2m7.memviz 1600 900 settings timeline
const { chromium } = require('playwright-core');

(async () => {
  const [port, name, w, h, ...views] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  for (const view of views) {
    const page = await browser.newPage({ viewport: { width: Number(w), height: Number(h) } });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    await page.goto(`http://127.0.0.1:${port}/web/index.html?archive=/archive/0/${name}&view=${view}`);
    await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout: 120000 });
    await page.waitForTimeout(3000); // what the first frame left to work out
    const metrics = async () =>
      Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    const before = await metrics();
    const frames0 = Number(await page.evaluate('window.memviz.frames()'));
    const t0 = Date.now();
    await page.mouse.move(w / 2, h / 2);
    await page.mouse.down();
    for (let i = 0; i < 60; i++) await page.mouse.move(w / 2 + 300 * Math.sin(i / 12), h / 2);
    await page.mouse.up();
    const took = Date.now() - t0;
    const after = await metrics();
    const frames = Number(await page.evaluate('window.memviz.frames()')) - frames0;
    const per = (k) => ((after[k] - before[k]) * 1000 / frames).toFixed(1);
    console.log(`${view} ${w}×${h}: ${(took / frames).toFixed(1)} ms a frame; the page's thread busy ` +
      `${per('TaskDuration')} ms a frame, running script ${per('ScriptDuration')} ms`);
    await page.close();
  }
  await browser.close();
})();
