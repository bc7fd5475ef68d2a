// A large archive in headless Chromium (playwright-core): the page fetches its first frame's
// parts first (`?parts`, then Range requests), draws that preview, then fetches the rest and
// opens the whole archive on the same view. Prints what it saw as JSON: the archive requests that
// started before the first frame (each one's Range header), what the page says it fetched first, whether
// the viewer previewed then (and its plot's rectangle), and afterwards the plot's rectangle, the
// id buffer beside the viewer's picks and a click.
//
//   node browser_preview.js URL
const { launch } = require('./chromium');
const { drawnIds } = require('./drawn_ids');

(async () => {
  const [url] = process.argv.slice(2);
  const browser = await launch();
  const seen = { errors: [], requests: [] };
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    page.on('pageerror', (e) => seen.errors.push(String(e)));
    // Each archive request, with when it started (ms since the epoch, the browser's clock).
    page.on('requestfinished', (r) => {
      if (!new URL(r.url()).pathname.startsWith('/archive/')) return;
      seen.requests.push({ url: r.url(), range: r.headers().range ?? null, started: r.timing().startTime });
    });
    await page.goto(url);
    await page.waitForFunction('window.memvizFirstFrameMs !== undefined', null, { timeout: 120000 });
    seen.previewing = await page.evaluate('window.memviz.previewing()');
    seen.preview_plot = await page.evaluate('window.memviz.plot_rect()');
    const drawnAt = await page.evaluate('performance.timeOrigin + window.memvizFirstFrameMs');
    seen.preview_bytes = await page.evaluate('window.memvizPreviewBytes ?? null');
    await page.waitForFunction('window.memvizWholeMs !== undefined', null, { timeout: 120000 });
    await page.waitForTimeout(500);
    seen.before_first_frame = seen.requests.filter((r) => r.started < drawnAt);
    seen.after = await page.evaluate('window.memviz.previewing()');
    seen.view = await page.evaluate('window.memviz.view()');
    const plot = await page.evaluate('window.memviz.plot_rect()');
    seen.plot = plot;
    seen.drawn = await drawnIds(page, plot);
    const [left, , right, bottom] = plot;
    const x = (left + right) / 2, low = bottom - 3;
    seen.under = await page.evaluate(([x, y]) => window.memviz.element_at(x, y) ?? null, [x, low]);
    await page.mouse.click(x, low);
    await page.waitForTimeout(300);
    seen.pinned = await page.evaluate('window.memviz.pinned() ?? null');

    // Coloured by category from the start (fetched whole): the categories come from the page's
    // web worker.
    const byCategory = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    byCategory.on('pageerror', (e) => seen.errors.push(String(e)));
    await byCategory.goto(url + '&colour=category');
    await byCategory.waitForFunction("window.memvizFirstFrameMs !== undefined && window.memviz.categories_present() !== undefined",
      null, { timeout: 120000 });
    seen.categories = await byCategory.evaluate('window.memviz.categories_present()');
    // The facts under the top bar (the shape candidates), the OOM markers and the annotation
    // lane's spans come from the worker too.
    await byCategory.waitForFunction("['top facts', 'oom marks', 'annotation spans'].every((j) => (window.memvizAnswered ?? []).includes(j))",
      null, { timeout: 30000 }).catch(() => {});
    // A search (Ctrl+F, then its text): its matches found in the worker too.
    await byCategory.keyboard.press('Control+f');
    await byCategory.keyboard.type('forward');
    await byCategory.waitForFunction("(window.memvizAnswered ?? []).includes('search') && window.memviz.search_matches() !== undefined",
      null, { timeout: 30000 }).catch(() => {});
    seen.search_matches = await byCategory.evaluate('window.memviz.search_matches() ?? null');
    seen.offloaded = await byCategory.evaluate('window.memvizAnswered ?? []');
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})();
