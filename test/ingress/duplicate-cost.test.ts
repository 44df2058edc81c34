/**
 * What a duplicate trigger costs besides its statements (issue 47 point 3, docs/ingress.md "What a
 * duplicate costs"): the SQL SQLite compiles for it on every trigger. The guarantees themselves are
 * the ingress, identity and race tests' (unchanged); these pin the cost.
 */
import { describe, expect, it } from "vitest";
import { parseTriggerBody } from "../../src/ingress/payload";
import { utf8 } from "../../src/lib/crypto";
import { CLAIM_SQL } from "../../src/ledger/identity-claim";

const count = (text: string, part: string) => text.split(part).length - 1;

describe("a duplicate's claim", () => {
  it("writes each of its subqueries at most three times (SQLite compiles every copy, on every trigger)", () => {
    const sql = CLAIM_SQL();
    // The live execution of the trigger: once for the insert, once for the update, once in its WHERE (10 before).
    expect(count(sql, "FROM executions l")).toBe(3);
    // A reusable FAILED execution: once for the update, once in its WHERE (7 before).
    expect(count(sql, "x.status = 'FAILED'")).toBe(2);
    expect(sql.length).toBeLessThan(3_000);
  });
});

describe("a trigger's body", () => {
  it("carries the stored JSON its size check made, so the start does not serialise the payload again", () => {
    const body = parseTriggerBody(utf8('{ "order": { "id": "A-1", "note": "é" } }'), "application/json");
    expect(body.stored).toEqual({ json: '{"order":{"id":"A-1","note":"é"}}', bytes: 34 });
    expect(parseTriggerBody(utf8("plain"), "text/plain").stored).toEqual({ json: '"plain"', bytes: 7 });
  });
});
