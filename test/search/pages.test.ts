/**
 * A page of `?identity=` costs the page, not the matches (migrations/0027, src/ledger/search.ts):
 * a value many executions share — a customer id in `idempotencyFields` — is paged newest first by
 * walking `identity_values` by (workspace, value_hash, created_at, execution_id) from the cursor,
 * so one page of 1 reads a handful of rows, however many executions match. The pages together are
 * every match once, in order; both readings of `1001` (the string and the number) merge in order.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { searchExecutions, searchQuery, type SearchHit } from "../../src/ledger";
import { identitySearchHashes } from "../../src/ingress/identity-values";
import { countingD1 } from "../helpers/counting-d1";
import { planOf } from "../helpers/query-plans";
import { dbOf } from "../helpers/shards";
import { transformWorkflow } from "../ingress/helpers";
import { harness, seedWorkflow, unique } from "../steps/helpers";
import { byIdentity, search, trigger, WS } from "./helpers";

const MATCHES = 60;

const idOf = (hit: SearchHit) => ("live" in hit ? hit.live.id : hit.removed.id);

describe("search by a value many executions share", () => {
  it("reads rows in proportion to the page, not to the matches; the pages are every match once, newest first", async () => {
    const h = harness();
    const wf = await seedWorkflow(WS, transformWorkflow(unique("shared"), { idempotencyFields: ["customer.id", "order.id"] }));
    // One customer, many orders: the customer's number, and now and then its string (the other reading).
    const customer = 700_000_000 + Math.floor(Math.random() * 100_000_000);
    const created: Array<{ id: string; at: number }> = [];
    for (let i = 0; i < MATCHES; i++) {
      // Two orders per millisecond now and then: the id breaks the tie.
      if (i % 3 !== 0) h.clock.advance(1);
      const id = i % 7 === 0 ? String(customer) : customer;
      const started = await trigger(h, wf, { customer: { id }, order: { id: unique("O") } });
      created.push({ id: started.executionId, at: h.clock.now() });
    }
    const newestFirst = [...created].sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)).map((c) => c.id);

    const db = dbOf(env, WS);
    const hashes = await identitySearchHashes(WS, String(customer));
    expect(hashes).toHaveLength(2);
    const term = { by: "identity" as const, hashes };

    // Page by page, a page of 1: each page reads a few rows, whatever the number of matches.
    const counted = countingD1(db);
    const seen: string[] = [];
    let before: { createdAt: number; id: string } | undefined;
    for (let page = 0; page <= MATCHES; page++) {
      counted.reset();
      const { hits, more } = await searchExecutions(counted.db, WS, term, { limit: 1, ...(before ? { before } : {}) });
      const [hit] = hits;
      if (!hit) break;
      seen.push(idOf(hit));
      expect(counted.rowsRead(), `page ${page}`).toBeLessThanOrEqual(20);
      const last = "live" in hit ? hit.live : hit.removed;
      before = { createdAt: last.createdAt, id: last.id };
      if (!more) break;
    }
    expect(seen).toEqual(newestFirst);

    // A page of 10 from the middle: about ten times the rows, still not the 60 matches.
    counted.reset();
    const middle = await searchExecutions(counted.db, WS, term, {
      limit: 10,
      before: { createdAt: created[30]!.at, id: created[30]!.id },
    });
    expect(middle.hits.map(idOf)).toEqual(newestFirst.slice(newestFirst.indexOf(created[30]!.id) + 1).slice(0, 10));
    expect(counted.rowsRead()).toBeLessThanOrEqual(80);

    // The route pages the same way with its cursor.
    const pages: string[] = [];
    let cursor: string | null = null;
    do {
      const answer = await search(h, `${byIdentity(String(customer))}&limit=25${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(answer.status).toBe(200);
      pages.push(...answer.items.map((i) => i.executionId));
      cursor = answer.nextCursor;
    } while (cursor);
    expect(pages).toEqual(newestFirst);
    // The quoted string finds only the executions triggered with the string.
    const strings = await search(h, `${byIdentity(JSON.stringify(String(customer)))}&limit=100`);
    expect(strings.items.map((i) => i.executionId)).toEqual(newestFirst.filter((id) => created.findIndex((c) => c.id === id) % 7 === 0));
  });

  it("each reading's rows are walked in order by the primary key and merged, never sorted in a temporary b-tree", async () => {
    const hashes = ["a".repeat(64), "b".repeat(64)];
    for (const f of [{ limit: 20 }, { limit: 20, before: { createdAt: 5, id: "x" }, since: 1, until: 9, status: "COMPLETED" as const }]) {
      const plan = (await planOf(searchQuery(WS, { by: "identity", hashes }, f).sql)).join("\n");
      expect(plan).toMatch(/MERGE \(UNION\)/);
      expect(plan).toMatch(/SEARCH v USING PRIMARY KEY \(workspace=\? AND value_hash=\?/);
      expect(plan).not.toMatch(/TEMP B-TREE/);
    }
  });
});
