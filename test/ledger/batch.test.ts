/**
 * The ledger's labelled batches and column maps (src/ledger/batch.ts, columns.ts), on real D1:
 * results are read by label whatever the statements' positions, and rows arrive as records.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { LabelledBatch } from "../../src/ledger/batch";
import { selectList, type Columns } from "../../src/ledger/columns";
import { countingD1 } from "../helpers/counting-d1";

describe("LabelledBatch", () => {
  it("reads each label's rows and changes, wherever its statements stand, in one round trip", async () => {
    const counting = countingD1(env.DB);
    const db = counting.db;
    const results = await new LabelledBatch<"numbers" | "letters" | "nothing">(db)
      .add("numbers", db.prepare("SELECT 1 AS n"))
      .add("letters", db.prepare("SELECT 'a' AS l"))
      .add("numbers", db.prepare("SELECT 2 AS n UNION ALL SELECT 3"))
      .add("nothing", db.prepare("SELECT 1 AS n WHERE 0"))
      .run();
    expect(counting.roundTrips()).toBe(1);
    expect(results.rows<{ n: number }>("numbers").map((r) => r.n)).toEqual([1, 2, 3]);
    expect(results.first<{ l: string }>("letters")).toEqual({ l: "a" });
    expect(results.first("nothing")).toBeNull();
    expect(results.changes("nothing")).toBe(0);
  });

  it("sends nothing when empty", async () => {
    const counting = countingD1(env.DB);
    const results = await new LabelledBatch<"none">(counting.db).run();
    expect(counting.roundTrips()).toBe(0);
    expect(results.rows("none")).toEqual([]);
  });
});

describe("column maps", () => {
  interface Probe {
    vertexId: string;
    state: string;
    bytes: number;
  }
  const PROBE: Columns<Probe> = { vertexId: "'v1'", state: "state", bytes: "length('abc')" };

  it("alias every field whose expression is not its own name", () => {
    expect(selectList(PROBE)).toBe(`'v1' AS "vertexId", state, length('abc') AS "bytes"`);
  });

  it("make D1 return the record itself, camelCase kept", async () => {
    const row = await env.DB.prepare(`SELECT ${selectList(PROBE)} FROM (SELECT 'EXECUTING' AS state)`).first<Probe>();
    expect(row).toEqual({ vertexId: "v1", state: "EXECUTING", bytes: 3 });
  });
});
