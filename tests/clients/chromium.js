// Debian's Chromium, headless (software WebGL2 through SwiftShader: no GPU), as the browser
// tests and benches launch it with playwright-core.
const { chromium } = require('playwright-core');

const launch = () => chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--enable-unsafe-swiftshader', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});

module.exports = { launch };
