#!/usr/bin/env node
/**
 * Inclusive time per function of a .cpuprofile (what `BENCH_PROFILE=…` writes), divided by the
 * number of operations the profile covered — how docs/ingress.md's duplicate profile was read:
 *
 *   node bench/lib/profile-inclusive.mjs <file.cpuprofile> [--per=64] [--top=60] [--match=regex] [--counts [--interval=200]]
 *
 * A sample counts once for every distinct function on its stack (recursion is not counted twice),
 * so a function's figure is the time spent in it and everything it called. Idle, GC and
 * "(program)" samples are listed apart.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith("--"));
const option = (name, fallback) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const per = Number(option("per", "1"));
const top = Number(option("top", "60"));
const match = option("match", undefined);
/**
 * --counts: weigh every sample alike (the sampling interval each) instead of by its time delta. On a
 * loaded machine a delta also holds the time the thread was descheduled, billed to whatever ran
 * when it was; a count is closer to the CPU the code took.
 */
const COUNTS = args.includes("--counts");
if (!file) {
  console.error("usage: profile-inclusive.mjs <file.cpuprofile> [--per=N] [--top=N] [--match=regex]");
  process.exit(2);
}

const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const label = (node) => {
  const { functionName, url, lineNumber } = node.callFrame;
  const script = url ? url.split("/").slice(-1)[0] : "(native)";
  return `${functionName || "(anonymous)"} ${script}:${lineNumber + 1}`;
};

const inclusive = new Map();
const self = new Map();
let total = 0;
let special = 0;
const deltas = profile.timeDeltas ?? [];
profile.samples.forEach((nodeId, i) => {
  const us = COUNTS ? (profile.samplingIntervalUs ?? Number(option("interval", "200"))) : (deltas[i + 1] ?? 0);
  total += us;
  const leaf = byId.get(nodeId);
  if (/^\((idle|program|garbage collector)\)$/.test(leaf.callFrame.functionName)) {
    special += us;
    self.set(label(leaf), (self.get(label(leaf)) ?? 0) + us);
    return;
  }
  self.set(label(leaf), (self.get(label(leaf)) ?? 0) + us);
  const seen = new Set();
  for (let id = nodeId; id !== undefined; id = parent.get(id)) {
    const name = label(byId.get(id));
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + us);
  }
});

const ms = (us) => ((us / 1000) * (1 / per)).toFixed(3).padStart(8);
console.log(
  `${file}: ${(total / 1000).toFixed(1)} ms sampled, ${((total - special) / 1000).toFixed(1)} ms in JS (per op: ${ms(total - special)} ms)`,
);
for (const [name, us] of [...self].filter(([n]) => /^\((idle|program|garbage collector)\)/.test(n))) console.log(`${ms(us)} ms  ${name}`);
console.log("--- inclusive, per operation");
const rows = [...inclusive].filter(([name]) => !match || new RegExp(match).test(name)).sort((a, b) => b[1] - a[1]);
for (const [name, us] of rows.slice(0, top)) console.log(`${ms(us)} ms  self ${ms(self.get(name) ?? 0)}  ${name}`);
