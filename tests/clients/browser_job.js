// A job's ranks in headless Chromium (playwright-core): `memviz serve` over a folder of rank
// snapshots lists it as a job; its link opens the viewer page on every rank (the rank strip,
// each archive indexed on the server first). Once every rank has loaded: a click on a rank's
// cell opens that rank (the link then names it alone), and on a fresh page two Shift+clicks
// open two ranks one above the other. Prints what it saw as JSON.
//
//   node browser_job.js LISTING_URL
const { launch, openPage } = require('./chromium');

(async () => {
  const [listing] = process.argv.slice(2);
  const browser = await launch();
  const seen = { errors: [] };
  // A page on `at` once every rank of its strip has loaded; its cells by rank index.
  const open = async (at) => {
    const page = await openPage(browser, at, seen.errors, 120000);
    await page.waitForFunction('(() => { const r = window.memviz.ranks(); return r.length > 2 && r[0] === r[1]; })()',
      null, { timeout: 60000 });
    await page.waitForTimeout(300);
    const r = await page.evaluate('window.memviz.ranks()');
    const cells = {};
    for (let i = 2; i + 4 < r.length; i += 5) cells[r[i]] = [r[i + 1], r[i + 2], r[i + 3], r[i + 4]];
    return { page, ranks: r[0], loaded: r[1], cells };
  };
  const centre = (c) => [(c[0] + c[2]) / 2, (c[1] + c[3]) / 2];
  try {
    const list = await browser.newPage();
    await list.goto(listing);
    seen.job_links = await list.$$eval('li a', (as) => as.map((a) => a.href));
    const job = seen.job_links[0];
    const strip = await open(job);
    seen.ranks = strip.ranks;
    seen.loaded = strip.loaded;
    seen.cells = Object.keys(strip.cells).length;
    seen.screen = await strip.page.evaluate('window.memviz.job_screen()');
    await strip.page.waitForTimeout(700); // the address bar follows, a few times a second
    seen.strip_address = await strip.page.evaluate('location.href');

    // A click on rank index 1's cell: that rank, alone in the link.
    await strip.page.mouse.click(...centre(strip.cells[1]));
    await strip.page.waitForTimeout(500);
    seen.opened = {
      screen: await strip.page.evaluate('window.memviz.job_screen()'),
      view: await strip.page.evaluate('window.memviz.view()'),
      link: await strip.page.evaluate('window.memviz.link() ?? null'),
    };
    await strip.page.waitForTimeout(700);
    seen.opened.address = await strip.page.evaluate('location.href');

    // Shift+click two ranks: the comparison.
    const again = await open(job);
    await again.page.keyboard.down('Shift');
    await again.page.mouse.click(...centre(again.cells[0]));
    await again.page.waitForTimeout(300);
    await again.page.mouse.click(...centre(again.cells[2]));
    await again.page.keyboard.up('Shift');
    await again.page.waitForTimeout(500);
    seen.compared = await again.page.evaluate('window.memviz.job_screen()');
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})();
