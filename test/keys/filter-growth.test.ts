/**
 * The key memory's filter past its generation's capacity (docs/history.md "Key memory: hot and
 * cold", "How the filter grows"): a pass that would overfill the current generation opens the next
 * (`generationFor`), and the probe — the guard's, the move's, the search's — reads every
 * generation: a key moved into the first generation is still found "maybe" after two more have
 * opened. With a capacity of 3 keys (a test's `generationKeys`), real D1, local R2.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { BITS_PER_BLOCK, keyDigest, maybeCold } from "../../src/keys/filter";
import { moveKeySendsOnce } from "../../src/keys/move";
import { DAY } from "../history/helpers";

const WS = "growth";
const DEST = "https://api.stripe.com";
const NOW = 1_900_000_000_000;

/** Kept sends past their hot period, held by no step (their executions are gone). */
async function seedDue(keys: string[]) {
  await env.DB.batch(
    keys.map((key, i) =>
      env.DB.prepare(
        `INSERT INTO destination_key_sends
           (workspace, idempotency_key, destination, first_sent_at, counted_from, execution_id, vertex_id, guarded, retention_ms)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5, 'charge', 1, ?6)`,
      ).bind(WS, key, DEST, NOW - 10 * DAY + i, `x${i}`, DAY),
    ),
  );
}

describe("the filter grows by generations", () => {
  it("a full generation opens the next; every generation is probed; a key never seen stays absent", async () => {
    const keys = Array.from({ length: 7 }, (_, i) => `order-${i}`);
    await seedDue(keys);
    const deps = { db: env.DB, bucket: env.KEY_MEMORY, now: NOW, hotMs: DAY, horizonMs: null, generationKeys: 3 };
    // Passes of two keys: 2 fit in generation 0, the next 2 would make 4 > 3 → generation 1, …
    let moved = 0;
    for (let pass = 0; pass < 10 && moved < keys.length; pass++) moved += (await moveKeySendsOnce(deps, 2)).moved;
    expect(moved).toBe(7);
    const { results: gens } = await env.DB.prepare("SELECT gen, keys FROM key_filter_gens ORDER BY gen").all<{
      gen: number;
      keys: number;
    }>();
    // (the last pass's one key fits: 2 + 1 ≤ 3).
    expect(gens).toEqual([
      { gen: 0, keys: 2 },
      { gen: 1, keys: 2 },
      { gen: 2, keys: 3 },
    ]);
    for (const g of gens) expect(g.keys).toBeLessThanOrEqual(3);
    // Each generation's rows hold only its own keys' bits: a key's block row exists in one generation.
    const digests = await Promise.all(keys.map((key) => keyDigest(WS, key)));
    const { results: rows } = await env.DB.prepare("SELECT block, gen FROM key_filter").all<{ block: number; gen: number }>();
    expect(new Set(rows.map((r) => r.gen))).toEqual(new Set([0, 1, 2]));
    // The probe finds every moved key, the oldest generation's included (one query).
    expect([...(await maybeCold(env.DB, digests))].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect([...(await maybeCold(env.DB, [digests[0]!]))]).toEqual([0]);
    // Keys never moved: absent (7 keys in 3 generations of 2^20 blocks set no other block's bits).
    const fresh = await Promise.all(Array.from({ length: 50 }, (_, i) => keyDigest(WS, `new-${i}`)));
    expect((await maybeCold(env.DB, fresh)).size).toBe(0);
    expect(BITS_PER_BLOCK).toBe(512);
  });
});
