/**
 * migrations/0026 names every trigger's lineage by its identity: each execution whose lineage head
 * was started by a trigger under an id other than its identity moves to the lineage named by that
 * identity, with the head's start overs and reuses after failure. This file's database (storage
 * is per test file) is taken back to the schema before 0026 — every table dropped, the earlier
 * migrations applied — and populated with every shape of lineage the engine left; then 0026 runs in
 * one batch, as `wrangler d1 migrations apply` runs it.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_RETENTION } from "../../src/history/retention";
import { startExecution, type NewExecution, type StartPlan } from "../../src/ledger";
import { CLAIM_SQL } from "../../src/ledger/identity-claim";
import { planOf, scansOf } from "../helpers/query-plans";
import { migrationSql, migrationsAfter, runMigration as run, schemaBefore } from "../helpers/migrations";

const migration = migrationSql(26);
const I = "a".repeat(64); // a trigger whose first execution (id = I) still exists
const J = "b".repeat(64); // a trigger whose lineage began after its first execution was removed
const K = "c".repeat(64); // a trigger whose only execution heads a lineage of its own (before 0015)
const id = (c: string) => c.repeat(64);

interface Row {
  id: string;
  identity: string | null;
  status: "RUNNING" | "COMPLETED" | "FAILED";
  lineage: string;
  from?: string | null;
  previous?: string | null;
}

const ROWS: Row[] = [
  { id: I, identity: I, status: "COMPLETED", lineage: I },
  { id: id("1"), identity: I, status: "COMPLETED", lineage: I }, // a later window, joined before
  { id: id("2"), identity: null, status: "COMPLETED", lineage: I, from: I }, // a start over of the first
  { id: id("3"), identity: J, status: "FAILED", lineage: id("3") }, // the head of its own lineage
  { id: id("4"), identity: null, status: "RUNNING", lineage: id("3"), from: id("3") }, // its start over, live
  { id: id("5"), identity: J, status: "COMPLETED", lineage: id("3"), previous: id("3") }, // a reuse after failure of it
  { id: id("6"), identity: K, status: "COMPLETED", lineage: id("6") },
  { id: id("7"), identity: null, status: "COMPLETED", lineage: id("7") }, // a forced test run: its own
  { id: id("8"), identity: null, status: "COMPLETED", lineage: id("7"), from: id("7") }, // its start over
];

// Today's code (the claim) runs on the schema every later migration leaves, applied once, after 0026's own checks.
let current: Promise<void> | undefined;
const upToDate = () => (current ??= migrationsAfter(26));

const lineages = async () =>
  Object.fromEntries(
    (await env.DB.prepare("SELECT id, lineage_id FROM executions ORDER BY id").all<{ id: string; lineage_id: string }>()).results.map(
      (r) => [r.id, r.lineage_id],
    ),
  );

beforeAll(async () => {
  await schemaBefore(26);
  await env.DB.batch(
    ROWS.map((r) =>
      env.DB.prepare(
        `INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                                 payload, started_over_from, previous_execution_id, lineage_id, created_at, updated_at, finished_at)
         VALUES (?1, 'mig', 'wf', 'v1', 'received', ?2, ?3, ?4, ?5, '{}', ?6, ?7, ?8, 1, 2, ?9)`,
      ).bind(
        r.id,
        r.from ? "start_over" : r.identity ? "webhook" : "test",
        r.identity ? "fields" : "forced",
        r.identity,
        r.status,
        r.from ?? null,
        r.previous ?? null,
        r.lineage,
        r.status === "RUNNING" ? null : 2,
      ),
    ),
  );
  await run(migration);
});

describe("migration 0026 on a populated database", () => {
  it("names every trigger's lineage by its identity, with its start overs and reuses; a forced run's stays its own", async () => {
    expect(await lineages()).toEqual({
      [I]: I,
      [id("1")]: I,
      [id("2")]: I,
      [id("3")]: J,
      [id("4")]: J,
      [id("5")]: J,
      [id("6")]: K,
      [id("7")]: id("7"),
      [id("8")]: id("7"),
    });
  });

  it("changes nothing when it runs again", async () => {
    const before = await lineages();
    await run(migration);
    expect(await lineages()).toEqual(before);
  });

  it("a trigger of a lineage whose head was removed is a duplicate of its live start over (no identity row left)", async () => {
    await upToDate();
    const record: NewExecution = {
      workspace: "mig",
      workflowId: "wf",
      version: "v1",
      entryVertexId: "received",
      triggerKind: "webhook",
      identityKind: "fields",
      payloadJson: "{}",
      retention: { ...DEFAULT_RETENTION },
    };
    const plan: StartPlan = { steps: [{ vertexId: "shape", state: "DISPATCHED" }], entryNext: ["shape"] };
    const outcome = await startExecution(
      env.DB,
      record,
      {
        mode: "claim",
        identity: J,
        claimToken: "token-mine",
        executionId: id("d"),
        alternateExecutionId: id("e"),
        expiresAt: 10_000,
        plans: { first: plan, alternate: plan },
      },
      3,
    );
    expect(outcome).toMatchObject({ created: false, executionId: id("4"), status: "RUNNING" });
  });
});

describe("the claim's one-live gate reads by index", () => {
  it("finds a live execution of the identity's lineage through executions_live_by_lineage, scanning no table", async () => {
    await upToDate();
    const plan = await planOf(CLAIM_SQL());
    expect(plan.some((line) => line.includes("executions_live_by_lineage"))).toBe(true);
    expect(scansOf(plan, ["executions", "execution_identities", "execution_tombstones"])).toEqual([]);
  });
});
