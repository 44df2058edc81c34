/**
 * The identity sweep's walk (migrations/0046, src/ledger/identity-sweep.ts): no expiry index — the
 * claims are read in key order, a bounded stretch per batch, from where the last tick stopped, and
 * the expired ones of each stretch deleted. Every expired claim goes within one walk; no live claim
 * ever does; the walk's statements search the primary key and scan nothing.
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it } from "vitest";
import { identityWalk, sweepExpiredIdentities } from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf } from "../helpers/query-plans";

const NOW = 1_900_000_000_000;

/** A claim with an identity spread over the key as a SHA-256 is, expired or live at NOW. */
async function claim(n: number, expired: boolean): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`claim-${n}`));
  const identity = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
  await env.DB.prepare(
    `INSERT INTO execution_identities (identity, workspace, workflow_id, execution_id, claim_token, window_start, expires_at)
     VALUES (?1, 'ws-walk', 'wf', ?2, 't', ?3, ?4)`,
  )
    .bind(identity, `x-${n}`, NOW - 10_000, expired ? NOW - 1 : NOW + 60_000)
    .run();
  return identity;
}

const left = async () =>
  (await env.DB.prepare("SELECT identity FROM execution_identities ORDER BY identity").all<{ identity: string }>()).results.map(
    (r) => r.identity,
  );
const position = () => env.DB.prepare("SELECT position FROM sweep_cursors WHERE name = 'identities'").first<string>("position");

beforeEach(async () => {
  await env.DB.batch([env.DB.prepare("DELETE FROM execution_identities"), env.DB.prepare("DELETE FROM sweep_cursors")]);
});

describe("the identity sweep's walk", () => {
  it("goes through every claim over ticks, from where each tick stopped: every expired one deleted, no live one", async () => {
    const live: string[] = [];
    for (let n = 0; n < 30; n++) {
      const identity = await claim(n, n % 3 !== 0);
      if (n % 3 === 0) live.push(identity);
    }
    // 4 claims a stretch, 2 stretches a tick: 8 claims a tick, so 30 claims take four ticks.
    const ticks = [];
    for (let t = 0; t < 4; t++) ticks.push(await sweepExpiredIdentities(env.DB, NOW, { batchSize: 4, maxBatches: 2 }));
    expect(ticks.map((t) => t.drained)).toEqual([false, false, false, true]);
    expect(ticks.reduce((sum, t) => sum + t.deleted, 0)).toBe(20);
    expect(await left()).toEqual(live.sort());
    // The walk starts over at the first key.
    expect(await position()).toBe("");
  });

  it("keeps its place between ticks: the next tick reads on from the last key it looked at", async () => {
    for (let n = 100; n < 110; n++) await claim(n, true);
    const first = await sweepExpiredIdentities(env.DB, NOW, { batchSize: 3, maxBatches: 1 });
    expect(first).toEqual({ deleted: 3, batches: 1, drained: false });
    const stopped = await position();
    // The three deleted were the three first keys; the walk stopped at the last of them.
    expect((await left()).every((identity) => identity > stopped!)).toBe(true);
    expect(await sweepExpiredIdentities(env.DB, NOW, { batchSize: 3, maxBatches: 1 })).toEqual({ deleted: 3, batches: 1, drained: false });
    expect(await left()).toHaveLength(4);
  });

  it("costs two reads of a stretch per batch and one round trip more per tick, and scans nothing", async () => {
    for (let n = 200; n < 205; n++) await claim(n, false);
    const counting = countingD1(env.DB);
    await sweepExpiredIdentities(counting.db, NOW, { batchSize: 10, maxBatches: 3 });
    // The position, then one batch (its stretch's end, then the delete and the new position): the walk wrapped.
    expect(counting.roundTrips()).toBe(3);
    expect(counting.rowsWritten()).toBe(1);
    for (const call of counting.calls) {
      for (const sql of call.sql) {
        const plan = await planOf(sql, "x");
        expect(scansOf(plan, ["execution_identities", "sweep_cursors"]), sql).toEqual([]);
      }
    }
  });

  it("walks 20,000 claims a tick on one shard in 9 queries, fewer a shard the more shards share the tick's 1,000", () => {
    const queries = (shards: number) => 1 + 2 * identityWalk(shards).maxBatches;
    expect(identityWalk(1)).toEqual({ batchSize: 5000, maxBatches: 4 });
    expect(queries(1)).toBe(9);
    expect(identityWalk(2).maxBatches).toBe(2);
    for (const shards of [4, 16, 64]) expect(identityWalk(shards).maxBatches).toBe(1);
    // Every shard's walk together stays a small part of the invocation's budget.
    for (const shards of [1, 2, 3, 4, 8, 16, 32]) expect(shards * queries(shards)).toBeLessThanOrEqual(9 + 3 * shards);
  });
});
