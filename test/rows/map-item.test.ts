/**
 * The rows a MAP item writes (issue 47 point 2, docs/ledger.md "Rows written per execution", the
 * paragraph "A MAP item"): a keyed Gateway item, chaining on, measured as the difference between a
 * MAP of 5 items and a MAP of 1 (everything else the execution writes is the same), in the rows D1
 * reports written (`meta.rows_written`: index entries and trigger writes included; exact locally).
 * An item's attempt row is written once, when the attempt ends (migrations/0041): no row opened at
 * its claim, no key recorded on it by its first key persist.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { countingD1, type CountingD1 } from "../helpers/counting-d1";
import { executionStatus, harness, seedWorkflow, unique } from "../steps/helpers";
import { refundLinesWorkflow } from "../steps/map-fixtures";

const WS = "rows-map";

/** entry → refund (a MAP, a keyed Gateway per line) → done. */
const refundLines = (concurrency: number) =>
  refundLinesWorkflow(concurrency, { maxAttempts: 3, backoff: "fixed", initialDelayMs: 1000, maxDelayMs: 1000 });

const order = (n: number) => ({
  order: { id: unique("O"), lines: Array.from({ length: n }, (_, i) => ({ sku: `S${i}`, amount: 10 + i })) },
});

const written = (c: CountingD1) => c.calls.map((call) => (call.rows ?? []).reduce((n, r) => n + r.written, 0));

/**
 * The rows written to run a MAP of `n` items to COMPLETED, from its start to the settle of its last
 * item — the MAP's decision (its claim, its items read, its settle) and the step after it left out:
 * they are the same whatever the items (but for the execution row's finish check, which writes a row
 * or not with the run's timing, not with its items).
 */
async function rowsToRun(n: number, o: { concurrency: number; chain: boolean }): Promise<number> {
  const counting = countingD1(env.DB);
  const h = harness({ db: counting.db }, o.chain ? { chain: true } : {});
  const wf = await seedWorkflow(WS, refundLines(o.concurrency));
  counting.reset();
  const id = await h.start(wf, order(n));
  await h.drain();
  expect(await executionStatus(id)).toBe("COMPLETED");
  const rows = written(counting);
  // The MAP's decision, its settle (done, a TRANSFORM, completed in it: src/steps/inline-transform.ts) and what follows.
  const decision = rows.length - 3;
  expect(counting.calls[decision]!.sql.some((q) => /UPDATE steps\s+SET state = 'EXECUTING'/.test(q))).toBe(true);
  return rows.slice(0, decision).reduce((a, b) => a + b, 0);
}

/** Per item: the difference between a MAP of 6 items and one of 2, over 4. */
const perItem = async (o: { concurrency: number; chain: boolean }) => ((await rowsToRun(6, o)) - (await rowsToRun(2, o))) / 4;

describe("the rows a MAP item writes", () => {
  it("an item through the queue: 16 rows to run — its claim 3, its key persist 3, its settle 3 (no attempt opened)", async () => {
    // All items started at the MAP's start: each one DISPATCHED, claimed from its message.
    expect(await perItem({ concurrency: 10, chain: true })).toBe(16);

    const counting = countingD1(env.DB);
    const h = harness({ db: counting.db });
    const wf = await seedWorkflow(WS, refundLines(3));
    const id = await h.start(wf, order(3));
    await h.deliver(h.queue.take().map((m) => m.body)); // the MAP: its items inserted, all three started
    const [first] = h.queue.take();
    counting.reset();
    await h.deliver([first!.body]);
    expect(counting.calls.map((c) => c.kind)).toEqual(["batch", "batch", "batch"]);
    // The claim: the row, its state entry, its lease entry. The key: the row (no `work_items_by_key`
    // entry: the key's send names the item, migrations/0043), the key's first send and its cold-due entry
    // (born kept: the removal writes nothing for it). The settle: the attempt's row (written once, now),
    // the row, its state entry.
    expect(written(counting)).toEqual([3, 3, 3]);
    const stored = await env.DB.prepare(
      "SELECT outcome, idempotency_key FROM step_attempts WHERE execution_id = ?1 AND vertex_id = 'refund#0'",
    )
      .bind(id)
      .all<{ outcome: string; idempotency_key: string | null }>();
    expect(stored.results).toEqual([{ outcome: "completed", idempotency_key: expect.stringMatching(/^refund-.*-S0$/) }]);
  });

  it("a chained item (claimed in the previous item's settle): 13 rows to run", async () => {
    expect(await perItem({ concurrency: 1, chain: true })).toBe(13);
  });
});
