/**
 * The key memory reads and deletes by index only (docs/history.md "Key memory: hot and cold"): the
 * move's scan of due sends (the partial index on `counted_from`, from its cursor), its delete (by
 * primary key), the filter's probe (one range of `key_filter` per digest) and upsert, and the
 * guard's restore — checked with EXPLAIN QUERY PLAN. A scan of a table that grows with the keys
 * would make every pass slower as the memory grows.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { addToFilter, keyDigest, maybeCold } from "../../src/keys/filter";
import { deleteMovedKeySends, readMoveCursor, restoreColdSend, saveMoveCursor, selectColdDue } from "../../src/ledger/key-memory";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf } from "../helpers/query-plans";

const GROWING = ["destination_key_sends", "key_filter", "steps", "work_items"];

describe("the key memory's query plans", () => {
  it("no statement scans a table that grows with the keys", async () => {
    const counted = countingD1(env.DB);
    const db = counted.db;
    const digest = await keyDigest("w", "k");
    await selectColdDue(db, 0, 10, null);
    await selectColdDue(db, 0, 10, [1, "w", "k", "d"]);
    await readMoveCursor(db);
    await saveMoveCursor(db, [1, "w", "k", "d"]).run();
    await deleteMovedKeySends(db, [["w", "k", "d"]], 0).run();
    await maybeCold(db, [digest]);
    for (const statement of addToFilter(db, [digest], 0)) await statement.run();
    await restoreColdSend(db, "w", "k", "d", { firstSentAt: 1, countedFrom: 1 });
    const statements = counted.calls.flatMap((c) => c.sql);
    expect(statements.length).toBeGreaterThanOrEqual(9);
    for (const sql of statements) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });
});
