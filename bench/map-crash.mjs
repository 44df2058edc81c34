// `npm run bench:map-crash [-- --items=300 --kill-at=100]`: the engine SIGKILLed in the middle of a
// MAP and restarted; the demo destination's record proves what happened (issue 43, docs/benchmarks.md).
//
// 1. Starts the demo destinations and the engine under `wrangler dev` from snapshots (fresh state,
//    migrated; bench/lib/bench-run.mjs), saves the demo connectors and workflows/refund-lines.json
//    (its connector pointed at the demo's port, `maxItems` raised to `--items`).
// 2. Triggers one order of `--items` lines: a MAP of one refund per line through the demo's
//    POST /refunds/lines, which records EVERY call per key (`created`, `replayed`, `conflict`).
// 3. Once `--kill-at` items have completed, SIGKILLs the engine's whole process group (wrangler and
//    workerd: no graceful anything; the local queue's messages in flight are lost with it).
// 4. Restarts the engine on the same state directory and ticks its cron every `--tick` ms, as
//    production's runs every minute (`wrangler dev` never fires it): the reaper re-sends the items
//    whose lease expired or whose message was lost.
// 5. Waits for the execution, then checks, from the engine's items and the demo's record:
//    - the execution and its MAP COMPLETED, every item COMPLETED;
//    - every item's key reached the destination exactly once in effect: one `created` call per key,
//      no `conflict`, and the keys the destination saw are the items' keys;
//    - no item was sent after it settled: no call under an item's key later than its finishedAt;
//    - re-sent keys (`replayed` calls) only for items that had not settled at the kill.
// Exit 0 when every check holds, 2 when one fails (the state directories kept for a look).
import { setTimeout as sleep } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { api } from "./lib/api.mjs";
import { machine } from "./lib/report.mjs";
import { flag, runBench } from "./lib/bench-run.mjs";
import { killEngine, listAll, putExampleWorkflow, restartEngine, startCrashRig, tickCron } from "./lib/crash-rig.mjs";

const RUN = Date.now().toString(36);
const ITEMS = Number(flag("items", 300));
const KILL_AT = Number(flag("kill-at", Math.round(ITEMS / 3)));
const TICK_MS = Number(flag("tick", 10_000));
const HARD_STOP_MS = Number(flag("hard-stop", 1_500_000));
const FINISH_MS = Number(flag("finish-timeout", 900_000));

process.env.X_LOCAL_OBSERVABILITY ??= "false";

const lines = Array.from({ length: ITEMS }, (_, i) => ({ sku: `SKU-${String(i).padStart(4, "0")}`, amount: 1 + (i % 40) }));

await runBench({ name: "map-crash", hardStopMs: HARD_STOP_MS }, async ({ dir, info, log, keepDir }) => {
  // The engine and the demo (connectors saved), the example workflow pointed at this demo.
  const rig = await startCrashRig({ dir, name: "map-crash", log });
  const { demo, loadBefore } = rig;
  let engine = rig.engine;
  const workflow = await putExampleWorkflow(rig, "refund-lines.json", `refund-lines-crash-${RUN}`, (w) => {
    w.vertices.find((v) => v.id === "refund").config.maxItems = ITEMS;
  });

  const orderId = `crash-${RUN}`;
  const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflow.id}/trigger`, { order: { id: orderId, lines } });
  log(`execution ${executionId}: a MAP of ${ITEMS} refunds; SIGKILL once ${KILL_AT} have completed…`);

  // 3. Watch the MAP's counters; kill the engine's process group mid-MAP.
  let atKill;
  let reachedAt;
  const watchDeadline = Date.now() + FINISH_MS;
  while (Date.now() < watchDeadline) {
    const trace = await api(engine.url, "GET", `/v1/executions/${executionId}`);
    const map = trace.steps?.find((s) => s.vertexId === "refund")?.map;
    if (trace.status !== "RUNNING") throw new Error(`execution ended ${trace.status} before the kill (raise --items or lower --kill-at)`);
    // Past `--kill-at`, wait (up to 20 s) for a moment with an item EXECUTING: a kill mid-call is the
    // interesting one (its side effect may be done, its settle not).
    if (
      map &&
      map.completed >= KILL_AT &&
      (map.executing > 0 || map.completed >= KILL_AT + 50 || Date.now() - (reachedAt ??= Date.now()) > 20_000)
    ) {
      atKill = { at: await killEngine(rig), ...map, items: undefined, nextCursor: undefined };
      break;
    }
    await sleep(100);
  }
  if (!atKill) throw new Error(`the MAP did not reach ${KILL_AT} completed items in time`);
  const callsAtKill = (await (await fetch(`${demo.url}/refunds/calls?order=${orderId}`)).json()).items.length;
  log(
    `SIGKILL (process group ${engine.pid}) at ${new Date(atKill.at).toISOString()}: completed ${atKill.completed}, ` +
      `executing ${atKill.executing}, dispatched ${atKill.dispatched}, pending ${atKill.pending} (last poll); ` +
      `the destination had ${callsAtKill} calls`,
  );

  // 4. Restart on the same state, tick the cron until the execution finishes.
  engine = await restartEngine(rig);
  const restartedAt = Date.now();
  log(`restarted in ${((restartedAt - atKill.at) / 1000).toFixed(1)} s; ticking the cron every ${TICK_MS / 1000} s…`);
  let trace;
  let lastTick = 0;
  let ticks = 0;
  const deadline = Date.now() + FINISH_MS;
  while (Date.now() < deadline) {
    trace = await api(engine.url, "GET", `/v1/executions/${executionId}`);
    if (trace.status !== "RUNNING") break;
    if (Date.now() - lastTick >= TICK_MS) {
      lastTick = Date.now();
      ticks++;
      await tickCron(engine);
    }
    await sleep(500);
  }
  const finishedIn = (Date.now() - restartedAt) / 1000;
  log(`execution ${trace.status} ${finishedIn.toFixed(1)} s after the restart (${ticks} cron ticks)`);

  // 5. The checks.
  const map = trace.steps?.find((s) => s.vertexId === "refund");
  const items = await listAll(engine.url, `/v1/executions/${executionId}/steps/refund/items`);
  const { items: calls } = await (await fetch(`${demo.url}/refunds/calls?order=${orderId}`)).json();
  const byKey = new Map();
  for (const call of calls) byKey.set(call.idempotencyKey, [...(byKey.get(call.idempotencyKey) ?? []), call]);
  const itemKeys = new Set(items.map((i) => i.idempotencyKey));
  const createdTwice = [...byKey.entries()].filter(([, c]) => c.filter((x) => x.outcome === "created").length !== 1).map(([k]) => k);
  const conflicts = calls.filter((c) => c.outcome === "conflict").length;
  const strangers = [...byKey.keys()].filter((k) => !itemKeys.has(k));
  const neverSent = [...itemKeys].filter((k) => !byKey.has(k));
  const sentAfterSettle = items.filter((i) =>
    (byKey.get(i.idempotencyKey) ?? []).some((c) => i.finishedAt !== null && Date.parse(c.at) > Date.parse(i.finishedAt)),
  );
  const resent = items.filter((i) => (byKey.get(i.idempotencyKey) ?? []).length > 1);
  const settledBeforeKill = items.filter((i) => i.finishedAt !== null && Date.parse(i.finishedAt) < atKill.at - 1_000);
  const resentAfterSettled = resent.filter((i) => settledBeforeKill.includes(i));
  const checks = [
    [`execution COMPLETED`, trace.status === "COMPLETED", trace.status],
    [`MAP step COMPLETED`, map?.state === "COMPLETED", map?.state],
    [
      `every item COMPLETED`,
      items.length === ITEMS && items.every((i) => i.state === "COMPLETED"),
      `${items.filter((i) => i.state === "COMPLETED").length} of ${items.length}`,
    ],
    [
      `one 'created' call per key (once in effect)`,
      createdTwice.length === 0 && byKey.size === ITEMS,
      `${byKey.size} keys, ${createdTwice.length} not created exactly once`,
    ],
    [`no 'conflict' call (no two items under one key)`, conflicts === 0, `${conflicts}`],
    [
      `the destination's keys are the items' keys`,
      strangers.length === 0 && neverSent.length === 0,
      `${strangers.length} unknown, ${neverSent.length} never sent`,
    ],
    [`no item sent after it settled`, sentAfterSettle.length === 0, `${sentAfterSettle.length} items`],
    [
      `re-sent only items unsettled at the kill`,
      resentAfterSettled.length === 0,
      `${resent.length} items re-sent, ${resentAfterSettled.length} of them settled before the kill`,
    ],
  ];
  const outcomes = (outcome) => calls.filter((c) => c.outcome === outcome).length;
  const retried = items.filter((i) => i.attempt > 1 || i.epoch > 1).length;
  const loadAfter = readFileSync("/proc/loadavg", "utf8").trim();
  console.log(
    [
      `bench:map-crash — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, node ${info.node}, wrangler ${info.wrangler}`,
      `/proc/loadavg before: ${loadBefore}; after: ${loadAfter} (1-minute at the end: ${machine().loadAverage1m})`,
      "",
      `${ITEMS} items (workflows/refund-lines.json, concurrency 10), SIGKILL of the engine's process group at ` +
        `${atKill.completed} completed / ${atKill.executing} executing / ${atKill.dispatched} dispatched / ${atKill.pending} pending ` +
        `(the last poll before the kill); the destination had ${callsAtKill} calls then.`,
      `Restarted in ${((restartedAt - atKill.at) / 1000).toFixed(1)} s; the execution ${trace.status} ${finishedIn.toFixed(1)} s later ` +
        `(${ticks} cron ticks, every ${TICK_MS / 1000} s).`,
      `The destination's record: ${calls.length} calls for ${byKey.size} keys — ${outcomes("created")} created, ` +
        `${outcomes("replayed")} replayed (a re-send of an item in flight at the kill, answered with its refund), ` +
        `${conflicts} conflicts; ${resent.length} items' keys sent more than once; ${retried} items with more than one attempt or epoch.`,
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
