// The viewer in headless Chromium, driven like a user (playwright-core). On the served page:
// wait for the first frame, read the id buffer at a few pixels (what the GPU draws there, beside
// what the viewer picks), click an element low in the plot (pinned: the element the viewer
// picks there), click above the data (unpinned), pin it again and press 2 (the pools view);
// then open the link "copy link" gives in a second page (the same view, pinned element and
// x range), which the address bar says too. With an exported page (file://), open it too and
// take both pages' screenshots on the same view. Prints what it saw as JSON.
//
//   node browser_client.js URL [EXPORTED_URL SHOTS_DIR]
const { launch, openPage } = require('./chromium');
const { drawnIds } = require('./drawn_ids');

(async () => {
  const [url, exported, shots] = process.argv.slice(2);
  const browser = await launch();
  const seen = { errors: [] };
  // A page on `at`, once it drew its first frame.
  const open = (at) => openPage(browser, at, seen.errors);
  const state = async (page) => ({
    view: await page.evaluate('window.memviz.view()'),
    pinned: await page.evaluate('window.memviz.pinned() ?? null'),
    x: await page.evaluate('window.memviz.x_range()'),
  });
  try {
    const page = await open(url);
    seen.first_frame_ms = Math.round(await page.evaluate('window.memvizFirstFrameMs'));
    const [left, top, right, bottom] = await page.evaluate('window.memviz.plot_rect()');
    seen.plot = [left, top, right, bottom];
    const x = (left + right) / 2, low = bottom - 3;
    seen.under = await page.evaluate(([x, y]) => window.memviz.element_at(x, y) ?? null, [x, low]);
    seen.drawn = await drawnIds(page, seen.plot);
    await page.mouse.click(x, low);
    await page.waitForTimeout(300);
    seen.pinned = await page.evaluate('window.memviz.pinned() ?? null');
    await page.mouse.click(x, top + 3);
    await page.waitForTimeout(300);
    seen.after_empty_click = await page.evaluate('window.memviz.pinned() ?? null');

    // A view switch (key 2: the pools view) with an element pinned, then the copied link.
    await page.mouse.click(x, low);
    await page.keyboard.press('2');
    await page.waitForTimeout(300);
    seen.switched = await state(page);
    // The pools view's pools and the timeline's OOM markers come from the page's web worker.
    await page.waitForFunction("['pools', 'oom marks'].every((j) => (window.memvizAnswered ?? []).includes(j))",
      null, { timeout: 30000 }).catch(() => {});
    seen.answered = await page.evaluate('window.memvizAnswered ?? []');
    seen.link = await page.evaluate('window.memviz.link()');
    await page.waitForTimeout(700); // the address bar follows the view, a few times a second
    seen.address = await page.evaluate('location.href');
    const again = await open(seen.link);
    seen.reopened = await state(again);

    if (exported) {
      // The exported page and a served page on the same (first) view, pixel for pixel.
      const file = await open(exported);
      const served = await open(url);
      await file.waitForTimeout(1500);
      await served.waitForTimeout(1500);
      seen.exported = await state(file);
      seen.exported_under = await file.evaluate(([x, y]) => window.memviz.element_at(x, y) ?? null, [x, low]);
      await file.screenshot({ path: `${shots}/exported.png` });
      await served.screenshot({ path: `${shots}/served.png` });
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})();
