/**
 * The history sweep reads and deletes by index only: every statement of a pass — the selection of
 * due chains (its recursive walk over the links), the hold, the removal batch with its guard —
 * and the side sweeps (events among them), checked with EXPLAIN QUERY PLAN. A scan of a table that grows with the
 * executions would make every pass slower as the backlog grows, on D1's single writer.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  erasedMeanwhile,
  eraseTakenEvents,
  holdChains,
  removeExecutions,
  selectChainOf,
  selectDueChains,
  sweepDeadLettersOnce,
  sweepEventsOnce,
  sweepKeySendsOnce,
  sweepTombstonesOnce,
} from "../../src/ledger";
import { countingD1 } from "../helpers/counting-d1";
import { planOf, scansOf, GROWING_TABLES } from "../helpers/query-plans";

/** The tables that grow with executions: none may be scanned. */
const GROWING = GROWING_TABLES;

describe("the history sweep's query plans", () => {
  it("no statement scans a table that grows with the executions", async () => {
    const counted = countingD1(env.DB);
    const db = counted.db;
    await selectDueChains(db, 0, 10);
    await selectChainOf(db, "w", "x", 0);
    await holdChains(db, [{ ids: ["x"], until: 1 }]);
    await removeExecutions(db, ["x"], 0, "retention");
    await sweepTombstonesOnce(db, 0, 10);
    await sweepDeadLettersOnce(db, 0, 10);
    await sweepKeySendsOnce(db, 0, 10);
    await sweepEventsOnce(db, 0, 10);
    const statements = counted.calls.flatMap((c) => c.sql);
    expect(statements.length).toBe(19); // the removal batch's eleven (a MAP's items among them) and the side sweeps'
    for (const sql of statements) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });

  it("nor does an erasure's: its removal batch, a swept execution's events, the archive's erased-meanwhile check", async () => {
    const counted = countingD1(env.DB);
    const db = counted.db;
    await removeExecutions(db, ["x"], 0, "erased");
    await eraseTakenEvents(db, "w", "x", 0);
    await erasedMeanwhile(db, ["x", "y"]);
    const statements = counted.calls.flatMap((c) => c.sql);
    expect(statements.length).toBeGreaterThan(2 + 1); // the removal batch, the two statements, the check
    for (const sql of statements) {
      const plan = await planOf(sql);
      expect(scansOf(plan, GROWING), `${sql}\n→ ${plan.join("\n  ")}`).toEqual([]);
    }
  });
});
