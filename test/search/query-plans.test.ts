/**
 * The search by business id reads by index only, and its writes do too (EXPLAIN QUERY PLAN): the
 * search's page — by value and by key, with each of the list's filters and a cursor — and its keys
 * statement; the start batch's index row, a start over's copy, an erasure's delete and the
 * tombstone trigger's. A scan of a table that grows with the executions would make a search, or
 * worse every trigger, slower as the shard fills.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { forgetIdentityValues, searchExecutions, searchKeysQuery, searchQuery, type SearchTerm } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, triggerBodies } from "../helpers/query-plans";
import { harness, seedWorkflow } from "../steps/helpers";
import { transformWorkflow } from "../ingress/helpers";
import { trigger, WS } from "./helpers";
import { startWorkflowExecution } from "../../src/ingress/start";
import type { StepMessage } from "../../src/steps/messages";

const GROWING = ["executions", "steps", "destination_key_sends", "execution_tombstones", "identity_values", "execution_identities"];

const TERMS: SearchTerm[] = [
  { by: "identity", hashes: ["a".repeat(64), "b".repeat(64)] },
  { by: "key", keys: ["charge-A-1001"] },
];

const FILTERS = [
  { limit: 20 },
  { limit: 20, workflowId: "wf", status: "COMPLETED" as const },
  { limit: 20, since: 1, until: 2 },
  { limit: 20, hadDuplicates: true, retried: true },
  { limit: 20, before: { createdAt: 5, id: "x" } },
];

/**
 * No scan of a growing table, by name or by alias (`s`, `ks`, `e`, `t`, `v`): the only scans allowed
 * are of a bound JSON array (`json_each`, a virtual table) and of the matches (`m`); and no walk of a
 * whole workspace through an index searched by the workspace alone.
 */
const noScan = async (sql: string) => {
  const plan = await planOf(sql);
  const why = `${sql}\n→ ${plan.join("\n  ")}`;
  expect(scansOf(plan, GROWING), why).toEqual([]);
  expect(
    plan.filter((line) => /^SCAN /.test(line) && !/^SCAN (\w+ VIRTUAL TABLE|m$)/.test(line)),
    why,
  ).toEqual([]);
  expect(
    plan.filter((line) => /\(workspace=\?\)/.test(line)),
    why,
  ).toEqual([]);
  return plan;
};

describe("the search's query plans", () => {
  it("the page and the keys, by value and by key, with every filter: no scan", async () => {
    for (const term of TERMS) {
      for (const filter of FILTERS) await noScan(searchQuery(WS, term, filter).sql);
      await noScan(searchKeysQuery(term));
    }
  });

  it("the key's lookup walks steps_by_key and the key sends' primary key; the value's the index's primary key", async () => {
    const byKey = (await planOf(searchQuery(WS, TERMS[1]!, { limit: 20 }).sql)).join("\n");
    expect(byKey).toMatch(/SEARCH s USING (COVERING )?INDEX steps_by_key \(workspace=\? AND idempotency_key=\?\)/);
    expect(byKey).toMatch(/SEARCH ks USING PRIMARY KEY \(workspace=\? AND idempotency_key=\?\)/);
    expect(byKey).toMatch(/SEARCH e USING PRIMARY KEY \(id=\?\)/);
    expect(byKey).toMatch(/SEARCH t USING PRIMARY KEY \(id=\?\)/);
    const byValue = (await planOf(searchQuery(WS, TERMS[0]!, { limit: 20 }).sql)).join("\n");
    expect(byValue).toMatch(/SEARCH v USING PRIMARY KEY \(workspace=\? AND value_hash=\?\)/);
  });

  it("a search runs one round trip by key, two by value (the page's keys after the page)", async () => {
    const counted = countingD1(env.DB);
    await searchExecutions(counted.db, WS, TERMS[1]!, { limit: 20 });
    expect(counted.calls.map((c) => [c.kind, c.sql.length])).toEqual([["batch", 2]]);
  });

  it("the start batch's index row, a start over's copy, an erasure's delete, the tombstone trigger's: no scan", async () => {
    const counted = countingD1(env.DB);
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(`plans-${Date.now()}`, { idempotencyFields: "order.id" }));
    const started = await trigger(h, wf, { order: { id: "plan-1" } }, { db: counted.db });
    await h.drain();
    await startWorkflowExecution(
      { db: counted.db, queue: h.queue as unknown as Queue<StepMessage>, now: h.clock.now },
      {
        workflow: wf,
        triggerKind: "start_over",
        payload: { order: { id: "plan-1" } },
        identity: { kind: "forced" },
        startedOverFrom: started.executionId,
      },
    );
    await forgetIdentityValues(counted.db, WS, "x");
    const writes = counted.calls.flatMap((c) => c.sql).filter((sql) => sql.includes("identity_values"));
    // The start over's copy and the erasure's delete; the start batch's rows are its trigger's (below).
    expect(writes).toHaveLength(2);
    for (const sql of writes) await noScan(sql);
    // The start batch's rows, written by the execution insert's trigger (migrations/0024) for the
    // winner only: the identity row by its key first, then its values' JSON.
    const [values] = await triggerBodies(["executions_identity_values"]);
    await noScan(values!.sql);
    expect((await planOf(values!.sql))[0]).toMatch(/^SEARCH i USING PRIMARY KEY \(identity=\?\)/);
    // The trigger on execution_tombstones (migrations/0021; by the values' primary keys since 0033).
    const [expire] = await triggerBodies(["identity_values_expire"]);
    await noScan(expire!.sql);
    expect((await planOf(expire!.sql)).join()).toMatch(/SEARCH identity_values USING PRIMARY KEY/);
  });
});
