/**
 * The history sweep's unit of removal, the chain (src/ledger/history.ts): its documented bound —
 * a chain of up to 200 members goes whole, a longer one is held — and the guards that keep a chain
 * whole between the selection and the removal. Real D1; rows written by the test where the shape
 * matters more than how the engine got there.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { ARCHIVE_RETRY_MS } from "../../src/history/sweep";
import { MAX_CHAIN_MEMBERS, removeExecutions, selectDueChains, type RemovableExecution } from "../../src/ledger";
import { DAY, sweepAt } from "./helpers";

async function foreignKeyProblems(): Promise<unknown[]> {
  return (await env.DB.prepare("PRAGMA foreign_key_check").all()).results;
}

/** A chain of start overs `prefix-1` ← `prefix-2` ← … of `members`, every one COMPLETED at 2 (due 7 days later). */
async function startOverChain(prefix: string, members: number): Promise<void> {
  await env.DB.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
     INSERT INTO executions (id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, identity, status,
                             payload, started_over_from, lineage_id, created_at, updated_at, finished_at)
     SELECT ?2 || '-' || i, 'w', 'wf', 'v', 'received', CASE WHEN i > 1 THEN 'start_over' ELSE 'test' END, 'forced', NULL, 'COMPLETED',
            '{}', CASE WHEN i > 1 THEN ?2 || '-' || (i - 1) END, ?2 || '-1', 1, 1, 2 FROM n`,
  )
    .bind(members, prefix)
    .run();
}

const left = async (prefix: string) =>
  (await env.DB.prepare("SELECT count(*) AS n FROM executions WHERE id LIKE ?1 || '-%'").bind(prefix).first<number>("n"))!;

describe("the chain bound", () => {
  it.each([128, 150, MAX_CHAIN_MEMBERS])("a chain of %i start overs, every member due, goes whole in one sweep", async (members) => {
    const prefix = `c${members}`;
    await startOverChain(prefix, members);
    const now = 2 + 31 * DAY;
    // Every member is due: the pass's roots are all in this one chain.
    const selection = await selectDueChains(env.DB, now, 100);
    expect(selection.chains.map((c) => c.length)).toContain(members);
    expect((await sweepAt(now)).report.removed).toBeGreaterThanOrEqual(members);
    expect(await left(prefix)).toBe(0);
    expect(await foreignKeyProblems()).toEqual([]);
  });

  it("a chain one member over the bound is held whole", async () => {
    const prefix = "over";
    await startOverChain(prefix, MAX_CHAIN_MEMBERS + 1);
    const now = 2 + 31 * DAY;
    const selection = await selectDueChains(env.DB, now, 100);
    expect(selection.chains.flat().some((e) => e.id.startsWith(`${prefix}-`))).toBe(false);
    expect(selection.held.flatMap((h) => h.ids).filter((id) => id.startsWith(`${prefix}-`)).length).toBeGreaterThan(0);
    // The removal by itself never cuts it either: a member alone is refused by the guard.
    expect((await removeExecutions(env.DB, [`${prefix}-2`], now, "retention")).executions).toBe(0);
    expect(await left(prefix)).toBe(MAX_CHAIN_MEMBERS + 1);
    await env.DB.prepare("DELETE FROM executions WHERE id LIKE 'over-%'").run();
  });
});

describe("the archive and the chain", () => {
  it("a chain goes only when every member's trace was archived: one member written is not enough", async () => {
    const prefix = "arch";
    await startOverChain(prefix, 3);
    const now = 2 + 31 * DAY;
    const offered: string[] = [];
    // An archive that writes only the chain's first member (an R2 outage after one put).
    const archive = async (executions: RemovableExecution[]) => {
      offered.push(...executions.map((e) => e.id));
      return new Set(executions.filter((e) => e.id === `${prefix}-1`).map((e) => e.id));
    };
    const { report } = await sweepAt(now, { archive });
    expect(offered).toEqual(expect.arrayContaining([`${prefix}-1`, `${prefix}-2`, `${prefix}-3`]));
    expect(report.archiveFailed).toBeGreaterThanOrEqual(3);
    expect(await left(prefix)).toBe(3);
    // Held whole, tried again after the archive's retry delay.
    const held = await env.DB.prepare("SELECT DISTINCT purge_at AS p FROM executions WHERE id LIKE 'arch-%'").all<{ p: number }>();
    expect(held.results).toEqual([{ p: now + ARCHIVE_RETRY_MS }]);
    // Once every member is written, it goes.
    const all = async (executions: RemovableExecution[]) => new Set(executions.map((e) => e.id));
    await sweepAt(now + ARCHIVE_RETRY_MS, { archive: all });
    expect(await left(prefix)).toBe(0);
    expect(await foreignKeyProblems()).toEqual([]);
  });
});
