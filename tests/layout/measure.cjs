// Measures a page as Chromium renders it at one width: every element that
// holds text, HTML or SVG, must lie within the page's width and, inside an
// SVG, within that SVG's box (an SVG clips what it cannot show). Prints one
// JSON line: the viewport and scroll widths, how many texts were seen and
// drawn, and every text that was cut off. Run by tests/layout.rs through
// scripts/playwright.sh: node measure.cjs URL WIDTH
const { chromium } = require("playwright-core");

(async () => {
  const [url, width] = [process.argv[2], Number(process.argv[3])];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu"],
  });
  try {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    await page.goto(url);
    // A live page fills itself from its first fetch.
    await page.waitForTimeout(2000);
    const found = await page.evaluate(() => {
      const viewport = document.documentElement.clientWidth;
      const cut = [];
      let drawn = 0;
      const texts = [...document.querySelectorAll("body *")].filter((e) =>
        [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()));
      for (const e of texts) {
        const r = e.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue; // not shown here
        drawn += 1;
        const text = e.textContent.trim().slice(0, 60);
        if (r.left < -0.5 || r.right > viewport + 0.5) {
          cut.push({ text, left: r.left, right: r.right, limit: viewport });
        }
        const svg = e.closest("svg");
        if (svg) {
          const s = svg.getBoundingClientRect();
          if (r.left < s.left - 0.5 || r.right > s.right + 0.5) {
            cut.push({ text, left: r.left, right: r.right, svg: [s.left, s.right] });
          }
        }
      }
      return { viewport, scroll_width: document.documentElement.scrollWidth,
               texts: texts.length, drawn, cut };
    });
    console.log(JSON.stringify(found));
  } finally {
    await browser.close();
  }
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
