// `npm run bench:compensation-crash [-- --orders=200 --kill-at=60 --tick=10000]`: the engine SIGKILLed
// while it compensates, restarted; the demo destination's record proves every charge was refunded
// exactly once (issue 45, docs/benchmarks.md).
//
// 1. Starts the demo destinations and the engine under `wrangler dev` from snapshots (fresh state,
//    migrated; bench/lib/bench-run.mjs), saves the demo connectors and workflows/order-with-refund.json
//    (pointed at the demo's port).
// 2. Triggers `--orders` orders whose address is "undeliverable": each is charged (POST
//    /payments/charges, key charge-<order>), its shipping refused for good (422), and its charge
//    refunded by the compensation (POST /refunds/lines, key refund-<order>-charge), which the demo
//    records per call (`created`, `replayed`, `conflict`).
// 3. Once `--kill-at` executions are COMPENSATED and others still COMPENSATING (or 20 s past
//    `--kill-at`), SIGKILLs the engine's whole process group (wrangler and workerd: the local
//    queue's messages in flight are lost with it).
// 4. Restarts the engine on the same state directory and ticks its cron every `--tick` ms, as
//    production's runs every minute (`wrangler dev` never fires it): the reaper re-sends the steps
//    and undo steps whose lease expired or whose message was lost.
// 5. Waits until no execution is RUNNING or COMPENSATING, then checks, from the engine's list and
//    the demo's record:
//    - every execution COMPENSATED;
//    - every order charged exactly once (one charge row per order, its key charge-<order>);
//    - every charge refunded exactly once in effect: one `created` refund call per order, under
//      refund-<order>-charge, no `conflict`, no refund call under any other key;
//    - re-sent refund keys (`replayed` calls) only for orders not COMPENSATED at the kill.
// Exit 0 when every check holds, 2 when one fails (the state directories kept for a look).
import { setTimeout as sleep } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { api } from "./lib/api.mjs";
import { machine } from "./lib/report.mjs";
import { flag, runBench } from "./lib/bench-run.mjs";
import { countBy, killEngine, listAll, putExampleWorkflow, restartEngine, startCrashRig, tickCron } from "./lib/crash-rig.mjs";

const RUN = Date.now().toString(36);
const ORDERS = Number(flag("orders", 200));
const KILL_AT = Number(flag("kill-at", Math.round(ORDERS * 0.3)));
const TICK_MS = Number(flag("tick", 10_000));
const TRIGGER_CONCURRENCY = Number(flag("trigger-concurrency", 10));
const HARD_STOP_MS = Number(flag("hard-stop", 1_800_000));
const FINISH_MS = Number(flag("finish-timeout", 1_200_000));

process.env.X_LOCAL_OBSERVABILITY ??= "false";

/** Every execution of `workflowId` with its status (the list route, 100 a page). */
const allExecutions = (engineUrl, workflowId) => listAll(engineUrl, `/v1/executions?workflowId=${workflowId}&limit=100`);

await runBench({ name: "compensation-crash", hardStopMs: HARD_STOP_MS }, async ({ dir, info, log, keepDir }) => {
  // The engine and the demo (connectors saved), the example workflow pointed at this demo.
  const rig = await startCrashRig({ dir, name: "compensation-crash", log });
  const { demo, loadBefore } = rig;
  let engine = rig.engine;
  const workflow = await putExampleWorkflow(rig, "order-with-refund.json", `order-with-refund-crash-${RUN}`);

  // 2. The orders, `--trigger-concurrency` at a time.
  const orders = Array.from({ length: ORDERS }, (_, i) => `crash-${RUN}-${String(i).padStart(4, "0")}`);
  const executionOf = new Map();
  const triggerStarted = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: TRIGGER_CONCURRENCY }, async () => {
      while (next < orders.length) {
        const id = orders[next++];
        const answer = await api(engine.url, "POST", `/v1/workflows/${workflow.id}/trigger`, {
          order: { id, total: 10 + (next % 40), address: "undeliverable" },
        });
        executionOf.set(id, answer.executionId);
      }
    }),
  );
  log(`${ORDERS} orders triggered in ${((Date.now() - triggerStarted) / 1000).toFixed(1)} s; SIGKILL once ${KILL_AT} are COMPENSATED…`);

  // 3. Watch the statuses; kill the engine's process group during compensation.
  let atKill;
  let reachedAt;
  const watchDeadline = Date.now() + FINISH_MS;
  while (Date.now() < watchDeadline) {
    const list = await allExecutions(engine.url, workflow.id);
    const counts = countBy(list, "status");
    const compensated = counts.COMPENSATED ?? 0;
    if (compensated >= ORDERS) throw new Error(`every execution COMPENSATED before the kill (lower --kill-at)`);
    if (compensated >= KILL_AT && ((counts.COMPENSATING ?? 0) > 0 || Date.now() - (reachedAt ??= Date.now()) > 20_000)) {
      atKill = {
        at: await killEngine(rig),
        counts,
        compensatedIds: list.filter((e) => e.status === "COMPENSATED").map((e) => e.executionId),
      };
      break;
    }
    await sleep(200);
  }
  if (!atKill) throw new Error(`${KILL_AT} executions were not COMPENSATED in time`);
  const callsAtKill = (await (await fetch(`${demo.url}/refunds/calls`)).json()).items.filter((c) => c.order?.startsWith(`crash-${RUN}-`));
  log(
    `SIGKILL (process group ${engine.pid}) at ${new Date(atKill.at).toISOString()}: ${JSON.stringify(atKill.counts)} ` +
      `(last poll); ${callsAtKill.length} refund calls at the demo`,
  );

  // 4. Restart on the same state, tick the cron until nothing runs or compensates.
  engine = await restartEngine(rig);
  const restartedAt = Date.now();
  log(`restarted in ${((restartedAt - atKill.at) / 1000).toFixed(1)} s; ticking the cron every ${TICK_MS / 1000} s…`);
  let executions = [];
  let lastTick = 0;
  let ticks = 0;
  const deadline = Date.now() + FINISH_MS;
  while (Date.now() < deadline) {
    executions = await allExecutions(engine.url, workflow.id);
    if (executions.length === ORDERS && executions.every((e) => e.status !== "RUNNING" && e.status !== "COMPENSATING")) break;
    if (Date.now() - lastTick >= TICK_MS) {
      lastTick = Date.now();
      ticks++;
      await tickCron(engine);
    }
    await sleep(1000);
  }
  const finishedIn = (Date.now() - restartedAt) / 1000;
  const finalCounts = countBy(executions, "status");
  log(`after the restart: ${JSON.stringify(finalCounts)} in ${finishedIn.toFixed(1)} s (${ticks} cron ticks)`);

  // 5. The checks, from the demo's record.
  const ours = (order) => typeof order === "string" && order.startsWith(`crash-${RUN}-`);
  const charges = (await (await fetch(`${demo.url}/payments/charges`, { headers: { authorization: "Bearer x" } })).json()).items.filter(
    (c) => ours(c.order),
  );
  const calls = (await (await fetch(`${demo.url}/refunds/calls`)).json()).items.filter((c) => ours(c.order));
  const chargesPer = countBy(charges, "order");
  const chargedTwice = orders.filter((o) => (chargesPer[o] ?? 0) !== 1);
  const wrongChargeKey = charges.filter((c) => c.idempotencyKey !== `charge-${c.order}`);
  const createdPer = new Map();
  for (const c of calls) if (c.outcome === "created") createdPer.set(c.idempotencyKey, (createdPer.get(c.idempotencyKey) ?? 0) + 1);
  const notRefundedOnce = orders.filter((o) => createdPer.get(`refund-${o}-charge`) !== 1);
  const strangers = calls.filter((c) => c.idempotencyKey !== `refund-${c.order}-charge`);
  const conflicts = calls.filter((c) => c.outcome === "conflict").length;
  const replayed = calls.filter((c) => c.outcome === "replayed");
  const compensatedAtKill = new Set(atKill.compensatedIds);
  const replayedAfterDone = replayed.filter((c) => compensatedAtKill.has(executionOf.get(c.order)));
  const checks = [
    [
      "every execution COMPENSATED",
      executions.length === ORDERS && (finalCounts.COMPENSATED ?? 0) === ORDERS,
      `${finalCounts.COMPENSATED ?? 0} of ${ORDERS} (${JSON.stringify(finalCounts)})`,
    ],
    [
      "every order charged exactly once (charge-<order>)",
      chargedTwice.length === 0 && wrongChargeKey.length === 0,
      `${charges.length} charges; ${chargedTwice.length} orders not charged exactly once; ${wrongChargeKey.length} under another key`,
    ],
    [
      "every charge refunded exactly once in effect (one 'created' call under refund-<order>-charge)",
      notRefundedOnce.length === 0,
      `${createdPer.size} refund keys created; ${notRefundedOnce.length} orders not refunded exactly once`,
    ],
    ["no refund call under any other key", strangers.length === 0, `${strangers.length}`],
    ["no 'conflict' call", conflicts === 0, `${conflicts}`],
    [
      "refund keys re-sent only for executions not COMPENSATED at the kill",
      replayedAfterDone.length === 0,
      `${replayed.length} replayed calls, ${replayedAfterDone.length} of them for executions COMPENSATED at the kill`,
    ],
  ];
  const loadAfter = readFileSync("/proc/loadavg", "utf8").trim();
  console.log(
    [
      `bench:compensation-crash — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, ` +
        `node ${info.node}, wrangler ${info.wrangler}`,
      `/proc/loadavg before: ${loadBefore}; after: ${loadAfter} (1-minute at the end: ${machine().loadAverage1m})`,
      "",
      `${ORDERS} orders of workflows/order-with-refund.json, every address undeliverable (ship: 422 for good); SIGKILL of the ` +
        `engine's process group at ${JSON.stringify(atKill.counts)} (the last poll before the kill); the demo had ` +
        `${callsAtKill.length} refund calls then.`,
      `Restarted in ${((restartedAt - atKill.at) / 1000).toFixed(1)} s; ${JSON.stringify(finalCounts)} ${finishedIn.toFixed(1)} s later ` +
        `(${ticks} cron ticks, every ${TICK_MS / 1000} s).`,
      `The demo's record: ${charges.length} charges; ${calls.length} refund calls for ${createdPer.size} keys — ` +
        `${calls.filter((c) => c.outcome === "created").length} created, ${replayed.length} replayed (a refund re-sent after ` +
        `the kill, answered with the first), ${conflicts} conflicts.`,
      "",
      ...checks.map(([what, ok, detail]) => `${ok ? "✓" : "✗"} ${what}: ${detail}`),
    ].join("\n"),
  );
  if (checks.some(([, ok]) => !ok)) {
    keepDir(["demo-state"]);
    return 2;
  }
  return 0;
});
