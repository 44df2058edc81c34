/**
 * Building the page from data without ever parsing it as markup: every string becomes a text
 * node (`document.createTextNode`) or an attribute value set with `setAttribute`, never HTML.
 * A payload holding `<script>` or `onerror=` is therefore shown as the characters it is. Nothing
 * in the inspector writes `innerHTML`, `outerHTML`, `insertAdjacentHTML` or `document.write`
 * (a test greps for them).
 */

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * `h("a", { href, class: "x", onclick }, "text", child, [more])`: an element. Props starting with
 * `on` become listeners; `class` and the rest are attributes (null/false skip, true is ""). Child
 * strings and numbers become text nodes; arrays are flattened; null/false/undefined are skipped.
 */
export function h(tag, props = {}, ...children) {
  return fill(document.createElement(tag), props, children);
}

/** The same for SVG elements. */
export function s(tag, props = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), props, children);
}

function fill(el, props, children) {
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A value as indented JSON text, for a `<pre>` (rendered as text like everything else). */
export function json(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

/**
 * The inspector shows every time in one zone, UTC, and labels each one with it (the header says so
 * too): the charts' buckets are UTC hours and days, so every other time is UTC as well.
 */
export const ZONE = "UTC";
const pad = (n, w = 2) => String(n).padStart(w, "0");

/** An ISO timestamp as "2026-12-07 01:49:12.123 UTC"; "—" for none. */
export function time(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const day = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  return `${day} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)} ${ZONE}`;
}

/** The clock as "01:49:12 UTC" (the pages' "Updated …" lines). */
export function clock(date = new Date()) {
  return `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())} ${ZONE}`;
}

/** A duration in ms as "850 ms", "2.4 s", "3 min 5 s", "2 h 10 min". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** A status word as a badge. */
export function badge(status) {
  const word = String(status ?? "unknown");
  return h("span", { class: `badge badge-${word.toLowerCase().replace(/[^a-z_]/g, "")}` }, word);
}
