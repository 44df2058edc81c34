/**
 * Key memory: a hot period per key (docs/history.md "Key memory: hot and cold", migrations/0036).
 * A kept key send stays in D1 for its key's declared retention plus KEY_MEMORY_HOT, counted from
 * its first send: retentions run from 24 h to 365 d, so one period for all keys would either move a
 * 30-day key cold while its destination still remembers it or keep 24-hour keys hot for weeks. The
 * retention is recorded with the send on both paths that write it: the first attempt's key persist
 * and the start batch's chained first step (a trigger). Real D1, the real app, local R2.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { coldObjectName } from "../../src/keys/cold";
import { keyDigest } from "../../src/keys/filter";
import { DEFAULT_SWEEP_LIMITS, sweepHistory } from "../../src/history/sweep";
import { DAY } from "../history/helpers";
import { chargeWorkflow, executionStatus, harness, seedWorkflow, stepsOf, unique } from "../steps/helpers";

const WS = "dev";
const HOUR = 3_600_000;
/** KEY_MEMORY_HOT in these sweeps: the margin past a key's retention. */
const MARGIN = DAY;

const workflow = (retention: string): WorkflowDefinitionInput =>
  ({
    ...chargeWorkflow(unique("wf"), {
      headers: { Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" },
      idempotencyKey: { value: "= $idempotencyKey('charge', payload.order.id)", retention },
    }),
    // The executions go long before their keys may: only the hot period keeps a send in D1.
    history: { completed: "1h" },
  }) as WorkflowDefinitionInput;

async function sweep(now: number) {
  return sweepHistory(
    {
      db: env.DB,
      now,
      elapsed: () => 0,
      queries: () => 0,
      archive: null,
      archiveQueries: 0,
      deadLetterMaxAgeMs: 30 * DAY,
      keySendHorizonMs: null,
      keyMemory: { bucket: env.KEY_MEMORY, hotMs: MARGIN },
    },
    DEFAULT_SWEEP_LIMITS,
  );
}

async function hotRow(key: string) {
  return env.DB.prepare("SELECT first_sent_at, retention_ms FROM destination_key_sends WHERE workspace = ?1 AND idempotency_key = ?2")
    .bind(WS, key)
    .first<{ first_sent_at: number; retention_ms: number | null }>();
}

async function isCold(key: string): Promise<boolean> {
  return (await env.KEY_MEMORY.head(coldObjectName(WS, (await keyDigest(WS, key)).hash))) !== null;
}

describe("key memory: a hot period per key", () => {
  for (const chain of [false, true]) {
    const path = chain ? "the start batch's chained first step (trigger)" : "the first attempt's key persist";
    it(`a 24 h key moves cold after 24 h + KEY_MEMORY_HOT while a 30 d key stays hot until 30 d + KEY_MEMORY_HOT — ${path}`, async () => {
      const h = harness({}, chain ? { chain: true } : {});
      const short = await seedWorkflow(WS, workflow("24h"));
      const long = await seedWorkflow(WS, workflow("30d"));
      const keys: Record<"short" | "long", string> = { short: "", long: "" };
      for (const [name, wf] of [
        ["short", short],
        ["long", long],
      ] as const) {
        const id = await h.start(wf, { order: { id: unique("O"), total: 3 } });
        await h.drain();
        expect(await executionStatus(id)).toBe("COMPLETED");
        keys[name] = (await stepsOf(id)).charge!.idempotency_key!;
      }
      // Each send records its key's declared retention.
      expect(await hotRow(keys.short)).toMatchObject({ retention_ms: 24 * HOUR });
      expect(await hotRow(keys.long)).toMatchObject({ retention_ms: 30 * DAY });
      const sentAt = (await hotRow(keys.short))!.first_sent_at;

      // Just before 24 h + the margin: the executions are swept (1 h), both keys still hot.
      const before = await sweep(sentAt + 24 * HOUR + MARGIN - 60_000);
      expect(before.removed).toBeGreaterThanOrEqual(2);
      expect(await hotRow(keys.short)).not.toBeNull();
      expect(await hotRow(keys.long)).not.toBeNull();

      // Past it: the 24 h key moves cold, the 30 d key stays one indexed read away.
      await sweep(sentAt + 24 * HOUR + MARGIN + 60_000);
      expect(await hotRow(keys.short)).toBeNull();
      expect(await isCold(keys.short)).toBe(true);
      expect(await hotRow(keys.long)).not.toBeNull();
      expect(await isCold(keys.long)).toBe(false);

      // Ten days on, still hot (one deployment-wide period of 2 days moved it long ago).
      await sweep(sentAt + 10 * DAY);
      expect(await hotRow(keys.long)).not.toBeNull();

      // Past 30 d + the margin: it moves too.
      await sweep(sentAt + 30 * DAY + MARGIN + 60_000);
      expect(await hotRow(keys.long)).toBeNull();
      expect(await isCold(keys.long)).toBe(true);
    });
  }
});
