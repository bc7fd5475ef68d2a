// The id buffer read back at a few pixels of the plot (the element the GPU's id pass draws there:
// `request_drawn_id`, then `drawn_id` once WebGL has mapped the buffer) beside what the viewer
// picks at the same pixel (`element_at`), through the page's test hooks. For playwright's and
// puppeteer's pages alike (string evaluations only).
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function drawnAt(page, px, py) {
  if (!await page.evaluate(`window.memviz.request_drawn_id(${px}, ${py})`)) return 'not asked';
  for (let i = 0; i < 200; i++) {
    const id = await page.evaluate('window.memviz.drawn_id() ?? null');
    if (id !== null) return id;
    await sleep(20);
  }
  return 'never read';
}

// Pixel centres across the plot `[left, top, right, bottom]` (CSS pixels): low (elements) to the
// very top (none).
async function drawnIds(page, [left, top, right, bottom]) {
  const out = [];
  for (const [fx, fy] of [[0.5, 0.99], [0.2, 0.95], [0.8, 0.9], [0.35, 0.7], [0.5, 0.01]]) {
    const px = Math.floor(left + (right - left) * fx) + 0.5, py = Math.floor(top + (bottom - top) * fy) + 0.5;
    const picked = await page.evaluate(`window.memviz.element_at(${px}, ${py}) ?? null`);
    out.push({ at: [px, py], drawn: await drawnAt(page, px, py), picked });
  }
  return out;
}

module.exports = { drawnIds };
