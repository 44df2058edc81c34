/**
 * The history sweep (SPEC section 12, docs/history.md): finished executions past their retention
 * go, chain by chain (src/ledger/history.ts), in passes bounded by executions, by D1 queries and
 * by wall time, with their traces archived first when an archive is given.
 *
 * A pass is one select of due chains (one statement), at most one statement holding the chains
 * that must wait, the archive's reads and writes, and one removal batch (eleven statements, every
 * DELETE bounded by the pass's ids). Passes repeat while they come back full and the budget lasts;
 * the caller continues through the queue when one invocation is not enough (./cron.ts).
 *
 * A crash between the archive write and the removal leaves the rows in place: the next pass
 * selects the same executions and writes the same objects again (same keys, same content).
 */
import {
  holdChains,
  removeExecutions,
  selectDueChains,
  sweepDeadLettersOnce,
  sweepInBatches,
  sweepEventsOnce,
  sweepKeySendsOnce,
  sweepTombstonesOnce,
  type HeldChain,
  type RemovableExecution,
} from "../ledger";
import { KEYS_PER_PASS, MOVE_PASS_QUERIES, moveKeySendsOnce } from "../keys/move";

/** Writes the traces of `executions` to the archive; returns the ids written (a failed one is kept in D1). */
export type Archiver = (executions: RemovableExecution[]) => Promise<ReadonlySet<string>>;

export interface HistorySweepLimits {
  /** Due executions looked at per pass (their chains come with them). */
  executionsPerPass: number;
  maxPasses: number;
  /** D1 queries the sweep may send (Workers allow 1,000 per invocation). */
  queryBudget: number;
  /** Wall time the sweep may take, in ms. */
  timeBudgetMs: number;
}

export const DEFAULT_SWEEP_LIMITS: HistorySweepLimits = {
  executionsPerPass: 100,
  maxPasses: 50,
  queryBudget: 700,
  timeBudgetMs: 20_000,
};

/** How long the chains of a pass's archive failures wait before they are tried again. */
export const ARCHIVE_RETRY_MS = 10 * 60_000;

/** Statements of one pass besides the archive: select, hold, removal batch (11: a MAP's items among them). */
const PASS_QUERIES = 13;
/** Tombstones, dead letters and expired key sends removed per bounded delete, and batches per sweep. */
const SIDE_SWEEP_LIMIT = 500;
const SIDE_SWEEP_MAX_BATCHES = 20;

export interface HistorySweepDeps {
  db: D1Database;
  now: number;
  /** The clock of the time budget (the wall clock; tests pass their own). */
  elapsed: () => number;
  /** Queries sent so far in this invocation (src/lib/query-count.ts). */
  queries: () => number;
  archive: Archiver | null;
  /** Queries one archive call may send (reads of the traces): counted before a pass starts. */
  archiveQueries: number;
  /** Dead letters older than this go (they have no execution column to follow). */
  deadLetterMaxAgeMs: number;
  /** Guarded key sends older than this go (HISTORY_KEY_SENDS); null or absent: kept for good. */
  keySendHorizonMs?: number | null;
  /** Events received longer ago than this go (EVENT_HISTORY); absent: events are not swept here. */
  eventHistoryMs?: number;
  /**
   * The cold tier of the key memory (src/keys, docs/history.md "Key memory: hot and cold"): kept
   * key sends past `hotMs` move there. Absent or null: they stay in D1.
   */
  keyMemory?: { bucket: R2Bucket; hotMs: number; onColdRead?: () => void } | null;
}

export interface HistorySweepReport {
  removed: number;
  archived: number;
  /** Due executions held back by their chain or their dedupe window (looked at again later). */
  held: number;
  /** Executions whose archive write failed: kept, tried again next pass. */
  archiveFailed: number;
  passes: number;
  /** Nothing due is left right now. */
  drained: boolean;
  /** Rows removed with the executions. */
  rows: { steps: number; attempts: number; events: number; duplicates: number; keySends: number };
  tombstones: number;
  deadLetters: number;
  /** Guarded key sends past the HISTORY_KEY_SENDS horizon (0 with the default, "forever"). */
  keySendsExpired: number;
  /** Events past EVENT_HISTORY removed (with their consumption records). */
  events: number;
  /** Kept key sends moved to the cold tier, and the cold objects written for them. */
  keysMoved: number;
  keysWritten: number;
  /** Keys whose cold write failed (kept hot, tried again), and cold records read to merge. */
  keysMoveFailed: number;
  keysColdReads: number;
  /** The move stopped on its bounds with keys still due: the sweep continues through the queue. */
  keysBehind: boolean;
}

export function emptyReport(): HistorySweepReport {
  return {
    removed: 0,
    archived: 0,
    held: 0,
    archiveFailed: 0,
    passes: 0,
    drained: true,
    rows: { steps: 0, attempts: 0, events: 0, duplicates: 0, keySends: 0 },
    tombstones: 0,
    deadLetters: 0,
    keySendsExpired: 0,
    events: 0,
    keysMoved: 0,
    keysWritten: 0,
    keysMoveFailed: 0,
    keysColdReads: 0,
    keysBehind: false,
  };
}

export async function sweepHistory(deps: HistorySweepDeps, limits: HistorySweepLimits = DEFAULT_SWEEP_LIMITS): Promise<HistorySweepReport> {
  const report = emptyReport();
  const passCost = PASS_QUERIES + (deps.archive ? deps.archiveQueries : 0);
  const canPass = () =>
    report.passes < limits.maxPasses && deps.queries() + passCost <= limits.queryBudget && deps.elapsed() < limits.timeBudgetMs;
  report.drained = false;
  while (canPass()) {
    report.passes += 1;
    const selection = await selectDueChains(deps.db, deps.now, limits.executionsPerPass);
    const held: HeldChain[] = [...selection.held];
    report.held += selection.held.reduce((n, h) => n + h.ids.length, 0);
    let chains = selection.chains;
    let archived: ReadonlySet<string> = new Set();
    if (deps.archive && chains.length > 0) {
      archived = await deps.archive(chains.flat());
      // A chain goes only when every member's trace is in the archive. The others are held a while
      // (an R2 outage, a trace over the caps, a part left for later): retried then, and meanwhile
      // they do not sit at the head of the index, filling every pass.
      const complete = chains.filter((chain) => chain.every((e) => archived.has(e.id)));
      const incomplete = chains.filter((chain) => !complete.includes(chain));
      report.archiveFailed += incomplete.flat().length;
      for (const chain of incomplete) held.push({ ids: chain.map((e) => e.id), until: deps.now + ARCHIVE_RETRY_MS });
      chains = complete;
    }
    if (held.length > 0) await holdChains(deps.db, held);
    const ids = chains.flat().map((e) => e.id);
    if (ids.length > 0) {
      const removal = await removeExecutions(deps.db, ids, deps.now, "retention", archived);
      report.removed += removal.executions;
      report.archived += removal.executions > 0 ? ids.filter((id) => archived.has(id)).length : 0;
      report.rows.steps += removal.steps;
      report.rows.attempts += removal.attempts;
      report.rows.events += removal.events;
      report.rows.duplicates += removal.duplicates;
      report.rows.keySends += removal.keySends;
    }
    // A short selection: everything due was looked at.
    if (selection.candidates < limits.executionsPerPass) {
      report.drained = true;
      break;
    }
    // A full selection that removed nothing and held nothing: stop rather than spin.
    if (ids.length === 0 && held.length === 0) break;
  }
  // The side sweeps keep up with the removals: every removed execution leaves a tombstone, so they
  // repeat while their batches come back full, within what is left of the budget.
  const side = (once: (limit: number) => Promise<number>) => sideSweep(once, deps, limits);
  report.tombstones = await side((limit) => sweepTombstonesOnce(deps.db, deps.now, limit));
  report.deadLetters = await side((limit) => sweepDeadLettersOnce(deps.db, deps.now - deps.deadLetterMaxAgeMs, limit));
  const horizon = deps.keySendHorizonMs ?? null;
  if (horizon !== null) report.keySendsExpired = await side((limit) => sweepKeySendsOnce(deps.db, deps.now - horizon, limit));
  const eventHistory = deps.eventHistoryMs;
  if (eventHistory !== undefined) report.events = await side((limit) => sweepEventsOnce(deps.db, deps.now - eventHistory, limit));
  if (deps.keyMemory) await moveKeys(deps, limits, report);
  return report;
}

/**
 * Kept key sends past the hot period to the cold tier (src/keys/move.ts): passes of
 * `KEYS_PER_PASS` keys while they come back full, within what is left of the query and time
 * budgets and `MAX_MOVE_PASSES` (one put per key: 400 R2 writes at most per invocation).
 */
const MAX_MOVE_PASSES = 4;

async function moveKeys(deps: HistorySweepDeps, limits: HistorySweepLimits, report: HistorySweepReport): Promise<void> {
  const memory = deps.keyMemory!;
  for (let pass = 0; pass < MAX_MOVE_PASSES; pass += 1) {
    if (deps.queries() + MOVE_PASS_QUERIES > limits.queryBudget || deps.elapsed() >= limits.timeBudgetMs) {
      report.keysBehind = true;
      return;
    }
    const moved = await moveKeySendsOnce(
      {
        db: deps.db,
        bucket: memory.bucket,
        now: deps.now,
        hotMs: memory.hotMs,
        horizonMs: deps.keySendHorizonMs ?? null,
        ...(memory.onColdRead ? { onColdRead: memory.onColdRead } : {}),
      },
      KEYS_PER_PASS,
    );
    report.keysMoved += moved.moved;
    report.keysWritten += moved.written;
    report.keysMoveFailed += moved.failed;
    report.keysColdReads += moved.coldReads;
    report.keySendsExpired += moved.forgotten;
    // A short pass: nothing more is due. One whose writes all failed (R2 down): stop until the next tick.
    // A pass that found only held sends moved its cursor past them: go on.
    if (!moved.full || (moved.failed > 0 && moved.moved === 0)) return;
  }
  report.keysBehind = true;
}

/** Bounded deletes of `SIDE_SWEEP_LIMIT` rows while they come back full, within what is left of the query budget. */
async function sideSweep(once: (limit: number) => Promise<number>, deps: HistorySweepDeps, limits: HistorySweepLimits): Promise<number> {
  const maxBatches = Math.min(SIDE_SWEEP_MAX_BATCHES, limits.queryBudget - deps.queries());
  if (maxBatches < 1) return 0;
  return (await sweepInBatches(once, { batchSize: SIDE_SWEEP_LIMIT, maxBatches })).deleted;
}
