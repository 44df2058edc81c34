/**
 * The model's regressions: operation sequences (test/model/ops.ts) that broke an invariant, each
 * replayed on a fresh world with every invariant checked after each operation (test/model/world.ts).
 * Issue 41's findings 1–3, written as the model reaches them; each fails on c803a4d (before their fixes).
 */
import { beforeAll, describe, expect, it, vi } from "vitest";
import type { Op } from "./ops";
import { interceptDestination, runOps } from "./world";

beforeAll(() => {
  interceptDestination();
  vi.spyOn(console, "log").mockImplementation(() => undefined);
  vi.spyOn(console, "warn").mockImplementation(() => undefined);
  vi.spyOn(console, "error").mockImplementation(() => undefined);
});

async function holds(ops: Op[]): Promise<void> {
  const found = await runOps(ops);
  expect(found && `${found.violation.message} (at operation ${found.at})`).toBeNull();
}

type TriggerOp = Extract<Op, { t: "trigger" }>;
const trigger = (ws: number, wf: "charge" | "waitOne" | "waitAll", order: number, customer = 0, again = false): TriggerOp => ({
  t: "trigger",
  ws,
  wf,
  order,
  customer,
  client: null,
  again,
});
const deliverAll: Op = { t: "deliver", all: true };

describe("model regressions (issue 41)", () => {
  it("finding 1: an execution id is never given again once its tombstone expires", { timeout: 60_000 }, async () => {
    await holds([
      trigger(0, "charge", 0),
      deliverAll,
      deliverAll,
      // Past the window (1m) and the retention (2m): the sweep removes it and leaves a tombstone…
      { t: "advance", ms: 150_000 },
      { t: "cron" },
      // …which expires 2m later.
      { t: "advance", ms: 150_000 },
      { t: "cron" },
      // The same order again: a new run, which must get a new id.
      trigger(0, "charge", 0),
      deliverAll,
    ]);
  });

  it(
    "finding 2: removing a trigger's first execution while a later window's runs starts no second live one",
    { timeout: 60_000 },
    async () => {
      await holds([
        trigger(0, "waitOne", 0),
        deliverAll,
        { t: "event", ws: 0, match: 0, id: null },
        deliverAll,
        deliverAll,
        // The window (1m) ends; the same customer's next order starts a second window's execution, which waits (5m).
        { t: "advance", ms: 61_000 },
        trigger(0, "waitOne", 1),
        deliverAll,
        // The first execution is swept (2m retention) while the second still waits…
        { t: "advance", ms: 150_000 },
        { t: "cron" },
        // …and the sender re-sends: a duplicate of the live execution, not a third one.
        trigger(0, "waitOne", 1, 0, true),
        { t: "settle" },
      ]);
    },
  );

  it(
    "finding 3: erasing one of two takers of a broadcast leaves no other workspace's event marked taken",
    { timeout: 60_000 },
    async () => {
      await holds([
        trigger(0, "waitAll", 0, 0),
        trigger(0, "waitAll", 0, 1),
        deliverAll,
        // One event resumes both `all` waits.
        { t: "event", ws: 0, match: 0, id: null },
        deliverAll,
        deliverAll,
        // Erase the first taker; then another workspace on the same shard sends an event nobody waits for.
        { t: "erase", ws: 0, pick: 0 },
        { t: "event", ws: 1, match: 1, id: null },
        // And a wait that starts within its buffer takes it.
        trigger(1, "waitOne", 1),
        deliverAll,
        { t: "settle" },
      ]);
    },
  );

  it(
    "finding 3, as random runs reach it (CI seed 5, shrunk): the other taker's consumption outlives no event",
    { timeout: 60_000 },
    async () => {
      await holds([
        { ...trigger(1, "waitAll", 0, 0), follow: true },
        { ...trigger(1, "waitAll", 1, 1), follow: true },
        deliverAll,
        { t: "event", ws: 1, match: 0, id: 2, follow: false },
        deliverAll,
        { t: "deliver", all: false },
        { t: "erase", ws: 1, pick: 0, taker: true },
      ]);
    },
  );
});
