/**
 * A stacked bar chart, drawn by the page as SVG with the DOM helper (`s()`, lib/dom.js): one bar per
 * bucket, one segment per series, a y axis with round ticks, a few x labels. No charting library:
 * the overview needs one kind of chart, and a library would be a dependency to audit and serve
 * for about a hundred lines; no style attribute either (the CSP has no 'unsafe-inline'): colours
 * are classes of overview.css, sizes are SVG attributes.
 *
 * The picture is `role="img"` with a label that says the totals in words; every bar has a <title>
 * with its numbers (shown on hover), and the page puts the same numbers in a table.
 */
import { s } from "../lib/dom.js";

const WIDTH = 960;
const HEIGHT = 240;
const MARGIN = { top: 12, right: 8, bottom: 30, left: 48 };
const MAX_X_LABELS = 8;

/** Round axis ticks from 0 to at least `max`: steps of 1, 2 or 5 × 10^n, about four of them. */
export function ticks(max) {
  if (!(max > 0)) return [0, 1];
  const rough = max / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(
    1,
    [1, 2, 5, 10].map((m) => m * power).find((candidate) => candidate >= rough),
  );
  const top = Math.ceil(max / step) * step;
  const out = [];
  for (let v = 0; v <= top; v += step) out.push(v);
  return out;
}

/**
 * `drawBars({ id, label, series, bars })`:
 * - `series`: `[{ key, name, cls }]`, bottom to top;
 * - `bars`: `[{ start, label, title, values: { [key]: number } }]`, oldest first; `label` is the
 *   x label (shown for some bars), `title` the bar's words (hover and the label of its group).
 */
export function drawBars({ id, label, series, bars }) {
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const stackOf = (bar) => series.reduce((sum, { key }) => sum + (bar.values[key] ?? 0), 0);
  const axis = ticks(Math.max(0, ...bars.map(stackOf)));
  const top = axis.at(-1);
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH;
  const slot = plotW / Math.max(1, bars.length);
  const barW = Math.max(1, slot * 0.72);
  const every = Math.max(1, Math.ceil(bars.length / MAX_X_LABELS));

  const grid = axis.map((v) =>
    s(
      "g",
      { class: "tick" },
      s("line", { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(v), y2: y(v) }),
      s("text", { x: MARGIN.left - 6, y: y(v) + 4, "text-anchor": "end" }, String(v)),
    ),
  );
  const drawn = bars.map((bar, i) => {
    const x = MARGIN.left + i * slot + (slot - barW) / 2;
    let base = 0;
    const segments = series.flatMap(({ key, cls }) => {
      const value = bar.values[key] ?? 0;
      if (value <= 0) return [];
      const rect = s("rect", { class: cls, x, y: y(base + value), width: barW, height: y(base) - y(base + value), "data-series": key });
      base += value;
      return [rect];
    });
    return s("g", { class: "bar", "data-start": bar.start, "data-total": stackOf(bar) }, s("title", {}, bar.title), segments);
  });
  const labels = bars.flatMap((bar, i) =>
    i % every === 0
      ? [s("text", { class: "x-label", x: MARGIN.left + i * slot + slot / 2, y: HEIGHT - 10, "text-anchor": "middle" }, bar.label)]
      : [],
  );
  return s(
    "svg",
    { id, class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": label },
    s("title", {}, label),
    s("g", { class: "grid" }, grid),
    s("line", { class: "baseline", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(0), y2: y(0) }),
    s("g", { class: "bars" }, drawn),
    s("g", { class: "x-labels" }, labels),
  );
}
