// `npm run bench:flow-crash [-- --n=100 | --map=500] [--kill-at=10 --delay=1500 --tick=10000]`: the engine SIGKILLed
// while it holds permits of a limited connector, restarted; the demo destination's own record and the
// connector's state (GET /v1/connectors/demo-limited/state) show the permits came back within a lease,
// no execution stuck and no limit broken (issue 44, docs/connectors.md "Limits", docs/benchmarks.md).
//
// 1. Starts the demo destinations and the engine under `wrangler dev` from snapshots (fresh state,
//    migrated; bench/lib/bench-run.mjs), saves the demo connectors (connectors/demo-limited.json: 5 in
//    flight, 20/s, burst 20) and workflows/limited-charges.json, pointed at the demo's port. The demo's
//    /limited API is set to answer each call after `--delay` ms (so calls are in flight at the kill)
//    and to refuse nothing below 45/s (rate + burst: the figure is the limiter's, not the demo's 429s).
// 2. Triggers `--n` orders (16 at a time) — or, with `--map=N`, one order whose MAP charges its N lines
//    through the same connector (20 items at once, the demo's latency 300 ms by default).
// 3. Once the demo recorded `--kill-at` charges and the connector's state shows permits in flight,
//    SIGKILLs the engine's whole process group (wrangler and workerd: the local queue's messages,
//    the permit waiters' wake-ups among them, are lost with it).
// 4. Restarts the engine on the same state and, before any cron tick, polls the connector's state:
//    the permits the dead worker held still count (their steps' leases are live) and must fall to 0
//    within one lease (30 s) of the kill — no sweep, nothing leaked.
// 5. Ticks the cron every `--tick` ms (production's runs every minute; `wrangler dev` never fires it):
//    the reaper takes over the dead worker's steps, the wake-up task re-sends the parked waiters.
//    Waits until no execution is RUNNING, then checks from the engine's list and the demo's record:
//    every execution COMPLETED; one charge per order, none doubled; never more than 5 in flight at
//    the destination (dead calls included) nor more than rate + burst in any second; no 429; the
//    scope idle at the end (nothing in flight or waiting).
// Exit 0 when every check holds, 2 when one fails (the state directories kept for a look).
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { api } from "./lib/api.mjs";
import { flag, runBench } from "./lib/bench-run.mjs";
import { markdownTable } from "./lib/report.mjs";
import { countBy, killEngine, listAll, putExampleWorkflow, restartEngine, startCrashRig, tickCron } from "./lib/crash-rig.mjs";

const RUN = Date.now().toString(36);
/** `--map=N`: one execution whose MAP charges N lines through the connector, instead of `--n` executions. */
const MAP = Number(flag("map", 0));
const N = MAP > 0 ? 1 : Number(flag("n", 100));
/** The charges the demo must end with: one per execution, or one per MAP line. */
const CHARGES = MAP > 0 ? MAP : N;
const KILL_AT = Number(flag("kill-at", 10));
const DELAY_MS = Number(flag("delay", MAP > 0 ? 300 : 1500));
const TICK_MS = Number(flag("tick", 10_000));
const FINISH_MS = Number(flag("finish-timeout", 600_000));
const CONNECTOR = "demo-limited";
/** The step's lease (src/steps/runtime.ts DEFAULT_LEASE_MS): a dead worker's permit returns by then. */
const LEASE_MS = 30_000;

process.env.X_LOCAL_OBSERVABILITY ??= "false";

const allExecutions = (engineUrl, workflowId) => listAll(engineUrl, `/v1/executions?workflowId=${workflowId}&limit=100`);

/** The most calls that started within any one second (sliding), from the record's start times. */
function maxPerSecond(starts) {
  const sorted = [...starts].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= 1000) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

/** `--map`: entry → a MAP over the order's lines (20 at once), each line a charge through the limited connector. */
function mapWorkflow() {
  return {
    id: "limited-map",
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
      {
        id: "charge",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency: 20,
          maxItems: MAP,
          maxCollectBytes: 64,
          onItemFailure: "fail",
          step: {
            type: "GATEWAY",
            config: {
              connector: CONNECTOR,
              operation: "charge",
              method: "POST",
              path: "/charges",
              keyFields: { order: "= payload.order.id & '-' & line.sku" },
              body: "= { 'order': payload.order.id & '-' & line.sku, 'amount': 5 }",
            },
          },
        },
      },
    ],
    edges: [{ from: "received", to: "charge" }],
  };
}

await runBench({ name: "flow-crash", hardStopMs: FINISH_MS + 300_000 }, async ({ dir, info, log, keepDir }) => {
  const rig = await startCrashRig({ dir, name: "flow-crash", log });
  const { demo, loadBefore } = rig;
  let engine = rig.engine;
  const demoCall = async (method, path, body) => {
    const res = await fetch(`${demo.url}${path}`, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.status === 204 ? null : res.json();
  };

  const connector = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
  const id = `limited-charges-crash-${RUN}`;
  const workflow = MAP > 0 ? { ...mapWorkflow(), id } : await putExampleWorkflow(rig, "limited-charges.json", id);
  if (MAP > 0) await api(engine.url, "PUT", `/v1/workflows/${id}`, workflow);
  const rate = connector.rate.count;
  const burst = connector.rate.burst;
  await demoCall("POST", "/limited/config", { rate: rate + burst + 5, delayMs: DELAY_MS, inject429: 0 });
  await demoCall("DELETE", "/limited/record");

  // 2. The orders, 16 at a time.
  const orders = Array.from({ length: N }, (_, i) => `FC-${RUN}-${String(i).padStart(4, "0")}`);
  const payloadOf = (id) =>
    MAP > 0 ? { order: { id, lines: Array.from({ length: MAP }, (_, i) => ({ sku: `S${i}` })) } } : { order: { id, total: 5 } };
  let next = 0;
  const firing = Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < orders.length) {
        const id = orders[next++];
        await api(engine.url, "POST", `/v1/workflows/${workflow.id}/trigger`, payloadOf(id)).catch(() => undefined);
      }
    }),
  );

  // 3. SIGKILL while permits are held.
  let atKill;
  const killDeadline = Date.now() + 300_000;
  while (Date.now() < killDeadline) {
    const record = await demoCall("GET", "/limited/record");
    const state = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
    if (record.effects >= KILL_AT && state.inFlight >= 2) {
      atKill = { at: await killEngine(rig), state, effects: record.effects, demoInFlight: record.inFlight };
      break;
    }
    await sleep(100);
  }
  if (!atKill) throw new Error(`no moment with ${KILL_AT} charges done and permits in flight`);
  await firing; // the triggers still in flight failed with the engine: fired again below
  log(`SIGKILL at ${new Date(atKill.at).toISOString()}: state ${JSON.stringify(atKill.state)}, ${atKill.effects} charges done`);

  // 4. Restart on the same state; before any cron tick, watch the dead worker's permits come back.
  engine = await restartEngine(rig);
  const restartedAt = Date.now();
  const afterRestart = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
  let returnedAt = null;
  const samples = [];
  while (Date.now() < atKill.at + LEASE_MS + 15_000) {
    const state = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
    samples.push({ s: ((Date.now() - atKill.at) / 1000).toFixed(1), inFlight: state.inFlight, waiting: state.waiting });
    if (state.inFlight === 0) {
      returnedAt = Date.now();
      break;
    }
    await sleep(500);
  }
  const returnedS = returnedAt === null ? null : (returnedAt - atKill.at) / 1000;
  const restartS = ((restartedAt - atKill.at) / 1000).toFixed(1);
  const then = `inFlight ${afterRestart.inFlight}, waiting ${afterRestart.waiting}`;
  const back = returnedS === null ? "NOT within lease + 15 s" : `${returnedS.toFixed(1)} s after the kill`;
  log(`restarted ${restartS} s after the kill: ${then}`);
  log(`dead worker's permits back (inFlight 0) ${back}`);

  // The orders whose trigger died with the engine: fired again (a trigger is idempotent by order id).
  const before = (await allExecutions(engine.url, workflow.id)).length;
  for (const id of orders) await api(engine.url, "POST", `/v1/workflows/${workflow.id}/trigger`, payloadOf(id));
  log(`${before} executions existed after the restart; every order fired again (a duplicate is the same execution)`);

  // 5. Tick the cron until nothing runs.
  let executions = [];
  let lastTick = 0;
  let ticks = 0;
  const deadline = Date.now() + FINISH_MS;
  while (Date.now() < deadline) {
    executions = await allExecutions(engine.url, workflow.id);
    if (executions.length === N && executions.every((e) => e.status !== "RUNNING")) break;
    if (Date.now() - lastTick >= TICK_MS) {
      lastTick = Date.now();
      ticks++;
      await tickCron(engine);
    }
    await sleep(1000);
  }
  const finishedS = (Date.now() - restartedAt) / 1000;
  const statuses = countBy(executions, "status");
  const record = await demoCall("GET", "/limited/record");
  const finalState = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
  log(`after the restart: ${JSON.stringify(statuses)} in ${finishedS.toFixed(1)} s (${ticks} cron ticks)`);

  const checks = [
    [
      `the dead worker's permits back within a lease (${LEASE_MS / 1000} s) of the kill, before any cron tick`,
      returnedS !== null && returnedS <= LEASE_MS / 1000 + 2,
    ],
    [`every execution COMPLETED (${N})`, executions.length === N && (statuses.COMPLETED ?? 0) === N],
    [`one charge per ${MAP > 0 ? "line" : "order"} (${CHARGES}), none doubled`, record.effects === CHARGES && record.doubled === 0],
    [
      "destination: never more than 5 in flight (the dead worker's calls included)",
      record.maxInFlight <= (connector.concurrency ?? Infinity),
    ],
    [`destination: never more than rate + burst (${rate + burst}) calls in one second`, maxPerSecond(record.startedAt) <= rate + burst],
    ["destination: no 429", record.refused === 0],
    ["the scope idle at the end (nothing in flight or waiting)", finalState.inFlight === 0 && finalState.waiting === 0],
  ];
  console.log(
    `\nbench:flow-crash — ${new Date().toISOString()} — ${info.cpus} × ${info.cpuModel}, load average ${loadBefore} (before), ` +
      `${readFileSync("/proc/loadavg", "utf8").trim()} (after)\n`,
  );
  console.log(
    markdownTable(
      ["figure", "value"],
      [
        [
          MAP > 0 ? "MAP lines (one execution); connector" : "executions; connector",
          `${CHARGES}; ${CONNECTOR} (concurrency ${connector.concurrency}, ${rate}/s, burst ${burst}); demo latency ${DELAY_MS} ms`,
        ],
        [
          "at the kill: charges done, permits in flight (state), calls at the demo",
          `${atKill.effects}, ${atKill.state.inFlight}, ${atKill.demoInFlight}`,
        ],
        ["restarted after the kill", `${restartS} s (state then: ${then})`],
        ["dead worker's permits back (inFlight 0), no cron tick", returnedS === null ? "no" : `${returnedS.toFixed(1)} s after the kill`],
        [
          "inFlight after the restart (s since the kill: in flight / waiting)",
          samples
            .filter((_, i) => i % 4 === 0)
            .map((x) => `${x.s}: ${x.inFlight}/${x.waiting}`)
            .join(", "),
        ],
        ["settled after the restart", `${finishedS.toFixed(1)} s, ${ticks} cron ticks: ${JSON.stringify(statuses)}`],
        ["destination: charges / doubled / 429s", `${record.effects} / ${record.doubled} / ${record.refused}`],
        ["destination: most in flight; most calls in one second", `${record.maxInFlight}; ${maxPerSecond(record.startedAt)}`],
        ["scope at the end", `inFlight ${finalState.inFlight}, waiting ${finalState.waiting}, heldBack ${finalState.heldBack}`],
      ],
    ),
  );
  console.log("");
  for (const [name, ok] of checks) console.log(`${ok ? "ok  " : "FAIL"}  ${name}`);
  if (checks.some(([, ok]) => !ok)) {
    keepDir([]);
    return 2;
  }
  return 0;
});
