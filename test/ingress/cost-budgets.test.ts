/**
 * What one execution and one duplicate cost the database (issue 31, docs/ledger.md "The start
 * batch"), counted on the wire by the counting wrapper and in the rows D1 reports written and read
 * (`meta.rows_written` / `meta.rows_read`: what D1 bills, index entries and trigger writes
 * included; exact locally). The bench's job: entry → charge (a Gateway with a business key) → a
 * TRANSFORM, a `fields` identity, chaining on.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { triggerFromRequest } from "../../src/ingress/trigger";
import type { IngressDeps } from "../../src/ingress/start";
import type { StoredWorkflow } from "../../src/definitions/store";
import type { StepMessage } from "../../src/steps/messages";
import { countingD1, type CountingD1 } from "../helpers/counting-d1";
import { GROWING_TABLES, planOf, scansOf, triggerBodies } from "../helpers/query-plans";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, unique, type Harness } from "../steps/helpers";
import { BASE, jsonRequest } from "./helpers";

const WS = "steps-chaining"; // granted the charge's Worker secret (vitest.config.ts)

/** The bench's workflow: the charge workflow whose trigger is deduplicated by the order id. */
function orderWorkflow(id: string): WorkflowDefinitionInput {
  const workflow = chargeWorkflow(id);
  workflow.vertices[0]!.config = { idempotencyFields: "order.id" };
  return workflow;
}

/** A trigger through the production route's service, chaining on, its inline run awaited. */
function triggers(h: Harness, counting: CountingD1, workflow: StoredWorkflow) {
  const inline: Array<Promise<unknown>> = [];
  const deps: IngressDeps = {
    db: counting.db,
    queue: h.queue as unknown as Queue<StepMessage>,
    now: h.clock.now,
    chain: { runtime: { ...h.rt, db: counting.db }, waitUntil: (work) => inline.push(work) },
  };
  return async (order: string) => {
    const result = await triggerFromRequest(deps, {
      workspace: WS,
      workflowId: workflow.workflowId,
      invocation: "production",
      workflow,
      request: jsonRequest(`${BASE}/v1/workflows/${workflow.workflowId}/trigger`, { order: { id: order, total: 42 } }),
    });
    await Promise.all(inline.splice(0));
    return result;
  };
}

const written = (c: CountingD1) => c.calls.map((call) => (call.rows ?? []).reduce((n, r) => n + r.written, 0));

describe("what an execution and a duplicate cost", () => {
  it("a duplicate trigger: one round trip, three statements, two rows written, the identity row untouched", async () => {
    const counting = countingD1(env.DB);
    const h = harness({}, { chain: true });
    const workflow = await seedWorkflow(WS, orderWorkflow(unique("wf")));
    const fire = triggers(h, counting, workflow);
    const order = unique("O");
    const created = await fire(order);
    expect(created.deduplicated).toBe(false);
    expect(await executionStatus(created.executionId)).toBe("COMPLETED");

    const identityBefore = await env.DB.prepare(
      "SELECT window_start AS windowStart, claim_token AS token FROM execution_identities WHERE execution_id = ?1",
    )
      .bind(created.executionId)
      .first<{ windowStart: number; token: string }>();
    counting.reset();
    const first = await fire(order);
    expect(first).toMatchObject({ executionId: created.executionId, deduplicated: true, status: "COMPLETED" });
    expect(counting.roundTrips()).toBe(1);
    expect(counting.statements()).toBe(3);
    // The execution's row (counter, time, log) and its entry in `executions_with_duplicates`
    // (rewritten by every duplicate: the count is in that partial index's WHERE).
    expect(counting.rowsWritten()).toBe(2);
    expect(counting.rowsRead()).toBeLessThanOrEqual(30);

    counting.reset();
    await fire(order);
    expect(counting.statements()).toBe(3);
    expect(counting.rowsWritten()).toBe(2);

    const row = await env.DB.prepare(
      `SELECT e.duplicate_deliveries AS counted, e.duplicate_log AS log, i.window_start AS windowStart, i.claim_token AS token
       FROM executions e JOIN execution_identities i ON i.execution_id = e.id WHERE e.id = ?1`,
    )
      .bind(created.executionId)
      .first<{ counted: number; log: string; windowStart: number; token: string }>();
    expect(row!.counted).toBe(2);
    expect(JSON.parse(row!.log).map((d: unknown[]) => [d[0], d[2], d[3]])).toEqual([
      [1, "webhook", "fields"],
      [2, "webhook", "fields"],
    ]);
    // The identity row is the winner's, as it wrote it.
    expect(row!.windowStart).toBe(identityBefore!.windowStart);
    expect(row!.token).toBe(identityBefore!.token);
    expect(h.dest.effects).toHaveLength(1);
  });

  it("a new trigger of the bench's job: 2 round trips, 3 + 6 statements, 15 rows written (45 … 18, 17, 16)", async () => {
    const counting = countingD1(env.DB);
    const h = harness({}, { chain: true });
    const workflow = await seedWorkflow(WS, orderWorkflow(unique("wf")));
    const fire = triggers(h, counting, workflow);
    await fire(unique("warm"));
    counting.reset();
    const created = await fire(unique("O"));
    expect(await executionStatus(created.executionId)).toBe("COMPLETED");
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch"]);
    expect(counting.calls.map((c) => c.sql.length)).toEqual([3, 6]);
    // Start: the identity (its row: no expiry index since migrations/0046, the sweep walks the keys),
    // the execution (its row: `executions` has no separate key since migrations/0044; four indexes,
    // one of them the live-lineage index) and its business value (its row: no index by execution
    // since migrations/0033), the entry (no row since migrations/0045: the execution row
    // is its step) and the claimed charge (row and lease index — no `steps_by_key` entry: its key's
    // send names it, migrations/0043 —, its key's first send, born kept with its cold-due entry so the
    // removal writes nothing for it, migrations/0043; no attempt row while it runs since migrations/0040).
    // Then the charge's settle: the charge settled with its completed attempt on its own row (no
    // attempt row since migrations/0042); done, a TRANSFORM, inserted COMPLETED with its attempt on
    // its row (src/steps/inline-transform.ts: no lease entry, no settle of its own, no third batch);
    // the finish (the row and its purge entry; it leaves the status index, which keeps no COMPLETED
    // entry since migrations/0033).
    expect(written(counting)).toEqual([11, 4]);
    expect(counting.rowsWritten()).toBe(15);
    const charge = await env.DB.prepare(
      `SELECT s.key_first_send AS first, ks.guarded, ks.unguarded FROM steps s
       JOIN destination_key_sends ks ON ks.workspace = s.workspace AND ks.idempotency_key = s.idempotency_key
       WHERE s.execution_id = ?1 AND s.vertex_id = 'charge' AND ks.execution_id = s.execution_id`,
    )
      .bind(created.executionId)
      .first();
    expect(charge).toEqual({ first: 1, guarded: 1, unguarded: 1 });
    expect(counting.rowsRead()).toBeLessThanOrEqual(120);
  });

  it("the harness trigger → settle path: 8 statements, 2 round trips, 13 rows written (40 … 17, 15, 14), on record", async () => {
    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db }, { chain: true });
    const workflow = await seedWorkflow(WS, chargeWorkflow(unique("wf")));
    await h.start(workflow, { order: { id: unique("warm"), total: 1 } });
    counting.reset();
    const id = await h.start(workflow, { order: { id: unique("O"), total: 42 } });
    expect(await executionStatus(id)).toBe("COMPLETED");
    expect(counting.calls.map((c) => c.sql.length)).toEqual([2, 6]);
    expect(counting.statements()).toBeLessThanOrEqual(8);
    // Each step one row less than before migrations/0038 (`steps` has no separate key index); each
    // attempt one row, written when it ends (migrations/0040: the start and the charge's settle no
    // longer open one); the attempt that completes a step on the step's own row (migrations/0042);
    // done completed in the charge's settle (src/steps/inline-transform.ts); the execution's row
    // without a separate key (migrations/0044); the entry without a row (migrations/0045).
    expect(written(counting)).toEqual([9, 4]);
    // Everything still on record: each step's attempt (numbered in the change stream), the key and its first send, the counters.
    const record = await env.DB.prepare(
      `SELECT (SELECT count(*) FROM step_attempts a
               WHERE a.execution_id = e.id AND a.outcome = 'completed' AND a.seq IS NOT NULL) AS attempts,
              (SELECT count(*) FROM destination_key_sends k WHERE k.execution_id = e.id) AS sends,
              (SELECT a.idempotency_key FROM step_attempts a WHERE a.execution_id = e.id AND a.vertex_id = 'charge') AS attemptKey,
              (SELECT s.idempotency_key FROM steps s WHERE s.execution_id = e.id AND s.vertex_id = 'charge') AS stepKey,
              e.max_attempt AS maxAttempt, e.redeliveries_stopped + e.fenced_out_writes + e.destination_replays AS stopped
       FROM executions e WHERE e.id = ?1`,
    )
      .bind(id)
      .first<{ attempts: number; sends: number; attemptKey: string; stepKey: string; maxAttempt: number; stopped: number }>();
    expect(record).toMatchObject({ attempts: 2, sends: 1, maxAttempt: 1, stopped: 0 });
    expect(record!.attemptKey).toBe(record!.stepKey);
  });

  it("every trigger body is one statement that scans no table growing with the executions", async () => {
    const bodies = await triggerBodies();
    expect(bodies.map((b) => b.name)).toEqual(
      expect.arrayContaining([
        "executions_identity_values",
        "executions_supersede_failed",
        "steps_attempt_unrecorded",
        "steps_key_sent_at_insert",
      ]),
    );
    for (const { name, sql } of bodies) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING_TABLES), `${name}: ${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });
});
