// The expression evaluator's overhead over plain JSONata, in Node (`npm run bench:expressions`).
//
// Why Node and not workerd: the Workers clock does not move during CPU-bound work, so timing an
// evaluation inside a Worker measures nothing. Both sides run the same jsonata package in the same
// process; idemflow's side is `evaluate()` from src/expressions/evaluate.ts (bundled in memory with
// esbuild, as scripts/ do), which adds the step/depth budget, the size checks (the exit hook and
// the bounded built-ins) and the JSON normalisation of the result. Compilation is cached on both
// sides, as it is in the engine, so this measures evaluation only.
//
// Two baselines: plain JSONata as anyone would call it (`jsonata(source)`), and plain JSONata with
// the options the engine compiles with (`sequence`, `stack`), which isolates the cost of the code
// idemflow adds (the exit hook, the wrapped built-ins, normalisation) from the cost of JSONata's
// own guard options. Each expression runs in a fresh Node process: JSONata's `sequence` option
// gives every sequence its own `push` closure, and after some tens of thousands of evaluations a
// process slows down several-fold (seen with plain JSONata + that option alone); a fresh process per
// expression keeps one expression's history out of the next one's figures.
//
// Time is the process's CPU time (`process.cpuUsage`, user + system), not wall time: on a shared
// machine other processes stretch wall time by whatever the scheduler decides, while the CPU this
// process spends is what an evaluation costs. Each expression is timed in alternating rounds
// (plain, idemflow, plain, …) so that drift hits both sides alike; an expression's ratio is the
// median over rounds of idemflow time / plain time, and the headline is the median of those ratios.
import jsonata from "jsonata";
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { importTs } from "../scripts/import-ts.mjs";
import { fmt, machine, markdownTable } from "./lib/report.mjs";

const ROUNDS = Number(process.env.ROUNDS ?? 9);
const ROUND_MS = Number(process.env.ROUND_MS ?? 60);

const items = Array.from({ length: 50 }, (_, i) => ({
  sku: `SKU-${i}`,
  qty: (i % 4) + 1,
  price: 5 + (i % 7) * 2.5,
  tags: i % 3 === 0 ? ["gift"] : [],
}));
const context = {
  payload: {
    order: { id: "A-1001", total: 1234.5, currency: "EUR", email: "ada@example.com", items },
    customer: { name: "Ada Lovelace", tier: "gold" },
  },
  steps: { charge: { status: 201, body: { id: "ch_123", amount: 1234.5 } } },
  execution: { id: "ex-1", workflowId: "order-fulfilment", trigger: "webhook" },
};

/** Representative definition expressions: keys, bodies, edge conditions, transforms. */
const EXPRESSIONS = [
  ["path", "payload.order.id"],
  ["edge condition", "steps.charge.status = 201"],
  ["key by concatenation", "'charge-' & payload.order.id"],
  ["body object", "{ 'order': payload.order.id, 'amount': payload.order.total, 'currency': payload.order.currency }"],
  ["arithmetic", "$round(payload.order.total * 1.2, 2)"],
  ["string functions", "$uppercase($substring(payload.customer.name, 0, 3)) & '-' & $lowercase(payload.order.currency)"],
  ["$substringAfter/$substringBefore", "$substringBefore($substringAfter(payload.order.email, '@'), '.')"],
  ["$sum of a mapped list", "$sum(payload.order.items.(qty * price))"],
  ["$map with a lambda", "$map(payload.order.items, function($i){ $i.sku & ':' & $i.qty })"],
  ["$filter + $count", "$count($filter(payload.order.items, function($i){ $i.qty > 2 }))"],
  ["predicate + path", "payload.order.items[qty > 2].sku"],
  ["$join of a path", "$join(payload.order.items.sku, ',')"],
  ["sort", "payload.order.items^(>price).sku[[0..4]]"],
  ["group by", "payload.order.items{ $string(qty): $sum(price) }"],
  ["$reduce", "$reduce(payload.order.items.qty, function($a, $b){ $a + $b })"],
  ["conditional", "payload.customer.tier = 'gold' ? payload.order.total * 0.9 : payload.order.total"],
  ["chained ~>", "payload.order.email ~> $substringAfter('@') ~> $uppercase()"],
  ["$string of an object", "$string({ 'id': payload.order.id, 'n': $count(payload.order.items) })"],
];

/** CPU milliseconds (user + system) this process has used. */
function cpuMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Mean CPU milliseconds of one evaluation over `iterations` back-to-back runs. */
function timeBatch(run) {
  return async (iterations) => {
    const started = cpuMs();
    for (let i = 0; i < iterations; i++) await run();
    return (cpuMs() - started) / iterations;
  };
}

/** How many evaluations fill about ROUND_MS of CPU. */
async function iterationsFor(run) {
  let n = 1;
  for (;;) {
    const started = cpuMs();
    for (let i = 0; i < n; i++) await run();
    const ms = cpuMs() - started;
    if (ms >= ROUND_MS / 4) return Math.max(1, Math.round((n * ROUND_MS) / ms));
    n *= 2;
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** One expression, in this process: median CPU µs per evaluation of each side, and the ratios. */
async function measureOne(index) {
  const [name, source] = EXPRESSIONS[index];
  const { evaluate, MAX_SEQUENCE_LENGTH, DEFAULT_LIMITS } = await importTs("src/expressions/evaluate.ts");
  const plain = jsonata(source);
  const guarded = jsonata(source, { sequence: MAX_SEQUENCE_LENGTH, stack: DEFAULT_LIMITS.maxDepth });
  const sides = {
    plain: () => plain.evaluate(context),
    options: () => guarded.evaluate(context),
    idemflow: () => evaluate(source, context),
  };
  // Same answer on every side, or the comparison is meaningless.
  const answers = await Promise.all(Object.values(sides).map(async (run) => JSON.stringify(await run())));
  if (new Set(answers).size !== 1) throw new Error(`${name}: results differ: ${answers.join(" | ")}`);
  for (let i = 0; i < 20; i++) for (const run of Object.values(sides)) await run(); // warm-up
  const n = await iterationsFor(sides.plain);
  const times = { plain: [], options: [], idemflow: [] };
  const ratios = { plain: [], options: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [side, run] of Object.entries(sides)) times[side].push(await timeBatch(run)(n));
    ratios.plain.push(times.idemflow[r] / times.plain[r]);
    ratios.options.push(times.idemflow[r] / times.options[r]);
  }
  return {
    name,
    source,
    us: { plain: median(times.plain) * 1000, options: median(times.options) * 1000, idemflow: median(times.idemflow) * 1000 },
    ratio: { plain: median(ratios.plain), options: median(ratios.options) },
  };
}

async function main() {
  const only = process.argv.indexOf("--one");
  if (only !== -1) {
    console.log(JSON.stringify(await measureOne(Number(process.argv[only + 1]))));
    return;
  }
  const loadBefore = loadavg()
    .map((n) => n.toFixed(2))
    .join(" ");
  const script = fileURLToPath(import.meta.url);
  const results = [];
  for (let i = 0; i < EXPRESSIONS.length; i++) {
    const out = execFileSync(process.execPath, [script, "--one", String(i)], { encoding: "utf8", env: process.env });
    results.push(JSON.parse(out.trim().split("\n").pop()));
    process.stderr.write(".");
  }
  process.stderr.write("\n");
  const loadAfter = loadavg()
    .map((n) => n.toFixed(2))
    .join(" ");
  const m = machine();
  const rows = results.map((r) => [
    r.name,
    `\`${r.source.replace(/\|/g, "\\|")}\``,
    r.us.plain.toFixed(1),
    r.us.options.toFixed(1),
    r.us.idemflow.toFixed(1),
    fmt.ratio(r.ratio.plain),
    fmt.ratio(r.ratio.options),
  ]);
  const headline = (key) => {
    const values = results.map((r) => r.ratio[key]);
    return `${fmt.ratio(median(values))}× (min ${fmt.ratio(Math.min(...values))}, max ${fmt.ratio(Math.max(...values))})`;
  };
  console.log(`# Expression evaluation: idemflow evaluate() vs plain jsonata (${new Date().toISOString().slice(0, 10)})\n`);
  console.log(
    `${m.cpus} × ${m.cpuModel}, node ${m.node}; ${ROUNDS} alternating rounds of ~${ROUND_MS} ms CPU per side and expression, one ` +
      `process per expression.`,
  );
  console.log(`Load average (1 5 15 min) before: ${loadBefore}; after: ${loadAfter}.\n`);
  console.log(
    markdownTable(["expression", "source", "plain µs", "plain + options µs", "idemflow µs", "÷ plain", "÷ plain + options"], rows),
  );
  console.log(`\n**Median ratio vs plain jsonata: ${headline("plain")}**; vs jsonata with the engine's options: ${headline("options")}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
