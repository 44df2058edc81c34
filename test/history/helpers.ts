/**
 * What the history tests share: one sweep at a time `now` (an archive or none, under a fresh query
 * counter that also holds every statement to D1's production limits), and what is left of an
 * execution — its rows per table, its tombstone.
 */
import { env } from "cloudflare:test";
import { ARCHIVE_READ_QUERIES } from "../../src/history/archive";
import { DEFAULT_SWEEP_LIMITS, sweepHistory, type Archiver, type HistorySweepLimits } from "../../src/history/sweep";
import { countingD1 } from "../helpers/counting-d1";
import { harness, seedWorkflow, unique } from "../steps/helpers";

export const DAY = 86_400_000;

export interface SweepOptions {
  archive?: Archiver | null;
  limits?: Partial<HistorySweepLimits>;
  /** HISTORY_KEY_SENDS as a horizon in ms; null (the default): guarded key sends kept for good. */
  keySendHorizonMs?: number | null;
  /** EVENT_HISTORY in ms; absent: events are not swept. */
  eventHistoryMs?: number;
}

/** One sweep over the file's database at `now`. */
export async function sweepAt(now: number, options: SweepOptions = {}) {
  const counted = countingD1(env.DB);
  const archive = options.archive ?? null;
  const report = await sweepHistory(
    {
      db: counted.db,
      now,
      elapsed: () => 0,
      queries: () => counted.statements(),
      archive,
      archiveQueries: archive ? ARCHIVE_READ_QUERIES : 0,
      deadLetterMaxAgeMs: 30 * DAY,
      keySendHorizonMs: options.keySendHorizonMs ?? null,
      ...(options.eventHistoryMs === undefined ? {} : { eventHistoryMs: options.eventHistoryMs }),
    },
    { ...DEFAULT_SWEEP_LIMITS, ...options.limits },
  );
  return { report, counted };
}

/** The rows of every table that belongs to an execution. */
export async function rowsOf(
  id: string,
): Promise<Record<"executions" | "steps" | "attempts" | "events" | "duplicates" | "keySends", number>> {
  const count = async (sql: string) => (await env.DB.prepare(sql).bind(id).first<{ n: number }>())!.n;
  return {
    executions: await count("SELECT count(*) AS n FROM executions WHERE id = ?1"),
    steps: await count("SELECT count(*) AS n FROM steps WHERE execution_id = ?1"),
    attempts: await count("SELECT count(*) AS n FROM step_attempts WHERE execution_id = ?1"),
    events: await count("SELECT count(*) AS n FROM step_events WHERE execution_id = ?1"),
    duplicates: await count("SELECT count(*) AS n FROM executions e, json_each(e.duplicate_log) WHERE e.id = ?1"),
    // The sends the execution holds while it lives: its unguarded ones (born kept but not aged meanwhile,
    // migrations/0043; before it, `guarded = 0` until the removal marked them kept). A sweep keeps every send.
    keySends: await count(
      `SELECT count(*) AS n FROM destination_key_sends
       WHERE execution_id = ?1 AND (guarded = 0 OR unguarded = 1) AND EXISTS (SELECT 1 FROM executions x WHERE x.id = ?1)`,
    ),
  };
}

export const GONE = { executions: 0, steps: 0, attempts: 0, events: 0, duplicates: 0, keySends: 0 };

export async function tombstoneOf(id: string) {
  return env.DB.prepare("SELECT * FROM execution_tombstones WHERE id = ?1").bind(id).first<Record<string, unknown>>();
}

export async function executionRow(id: string) {
  return env.DB.prepare("SELECT id, workspace, created_at AS createdAt, finished_at AS finishedAt FROM executions WHERE id = ?1")
    .bind(id)
    .first<{ id: string; workspace: string; createdAt: number; finishedAt: number }>();
}

/** `count` executions of a one-step workflow in `workspace`, finished on a harness's clock, and when all are due (7 days later). */
export async function finishedExecutions(workspace: string, count: number): Promise<{ ids: string[]; dueAt: number }> {
  const h = harness();
  const wf = await seedWorkflow(workspace, {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      { id: "done", type: "TRANSFORM", config: { output: { ok: true } } },
    ],
    edges: [{ from: "received", to: "done" }],
  });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push(await h.start(wf, { i }));
  await h.drain();
  return { ids, dueAt: h.clock.now() + 7 * DAY };
}
