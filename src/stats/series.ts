/**
 * `GET /v1/stats/series`, the parts that are not HTTP: the range a query asks for, aligned to its
 * buckets and bounded, and the answer assembled from the ledger's records (src/ledger
 * `readStatsSeries`: the rollup's hours, then the hours not rolled up yet computed live).
 *
 * Buckets are UTC hours or UTC days. Every bucket of the range is in the answer, zeros included,
 * so a chart needs no gap filling. The live part is at most `LIVE_HOURS` hours (the current hour
 * and the two before it): enough for the hour the rollup has not reached yet (it rolls an hour 5
 * minutes after it ends), and never a long scan of the executions when the cron has stopped —
 * then `rolledUpUntil` and `liveSince` say which hours are missing.
 */
import { DAY_MS, HOUR_MS, type SeriesRecords, type StatsBucketRecord } from "../ledger";
import { isoTime } from "../lib/iso-time";
import { hourOf } from "./rollup-plan";

export type Bucket = "hour" | "day";

export const BUCKET_MS: Readonly<Record<Bucket, number>> = Object.freeze({ hour: HOUR_MS, day: DAY_MS });
/** The most buckets one answer holds: 31 days of hours, 400 days (the rollup's retention) of days. */
export const MAX_BUCKETS: Readonly<Record<Bucket, number>> = Object.freeze({ hour: 31 * 24, day: 400 });
/** The buckets a range holds when `since` is not given: a day of hours, 30 days. */
const DEFAULT_BUCKETS: Readonly<Record<Bucket, number>> = Object.freeze({ hour: 24, day: 30 });
/** The hours a series may compute live from the executions, at most (the current one included). */
export const LIVE_HOURS = 3;

export interface SeriesRange {
  bucket: Bucket;
  bucketMs: number;
  /** The first bucket's start and the last bucket's end. */
  since: number;
  until: number;
}

/** Why a range is refused: the parameter to name, and what is wrong with it. */
export interface RangeRefusal {
  refused: true;
  parameter: "since" | "until";
  message: string;
}

const floorTo = (t: number, size: number) => Math.floor(t / size) * size;
const ceilTo = (t: number, size: number) => Math.ceil(t / size) * size;

/**
 * The range of a query at `now`: `until` (default now) rounded up to its bucket's end, `since`
 * (default a day of hours, or 30 days, before that) rounded down to its bucket's start. Refused:
 * `since` not before `until`, or more buckets than `MAX_BUCKETS`.
 */
export function seriesRange(query: { bucket: Bucket; since?: number; until?: number }, now: number): SeriesRange | RangeRefusal {
  const { bucket } = query;
  const bucketMs = BUCKET_MS[bucket];
  if (query.since !== undefined && query.until !== undefined && !(query.since < query.until)) {
    return { refused: true, parameter: "until", message: "must be after since" };
  }
  const until = ceilTo(query.until ?? (query.since !== undefined ? Math.max(now, query.since + 1) : now), bucketMs);
  const since = query.since !== undefined ? floorTo(query.since, bucketMs) : until - DEFAULT_BUCKETS[bucket] * bucketMs;
  if (isoTime(since) === null || isoTime(until) === null) {
    return { refused: true, parameter: query.since !== undefined ? "since" : "until", message: "must be within the years 0000-9999" };
  }
  const buckets = (until - since) / bucketMs;
  if (buckets > MAX_BUCKETS[bucket]) {
    const hint = bucket === "hour" ? "; ask for bucket=day" : "";
    return {
      refused: true,
      parameter: "since",
      message: `the range holds ${buckets} ${bucket}s, at most ${MAX_BUCKETS[bucket]} with bucket=${bucket}${hint}`,
    };
  }
  return { bucket, bucketMs, since, until };
}

/** The earliest hour a series computed at `now` may compute live. */
export const liveFloorAt = (now: number): number => hourOf(now) - (LIVE_HOURS - 1) * HOUR_MS;

export interface BucketCounts {
  executions: number;
  triggers: number;
  redeliveries: number;
  fencedOut: number;
  destinationReplays: number;
  byStatus: {
    RUNNING: number;
    COMPLETED: number;
    FAILED: number;
    CANCELLED: number;
    COMPENSATING: number;
    COMPENSATED: number;
    COMPENSATION_FAILED: number;
  };
  events: { received: number; duplicates: number } | null;
}

export interface SeriesAnswer {
  bucket: Bucket;
  since: string | null;
  until: string | null;
  workflowId: string | null;
  rolledUpUntil: string | null;
  liveSince: string | null;
  buckets: Array<BucketCounts & { start: string | null; live: boolean }>;
  total: BucketCounts;
}

/** The answer: every bucket of the range (zeros included) with the rollup's and the live records added in. */
export function seriesAnswer(range: SeriesRange, records: SeriesRecords, workflowId: string | null): SeriesAnswer {
  const withEvents = workflowId === null;
  const byStart = new Map<number, BucketCounts>();
  for (let start = range.since; start < range.until; start += range.bucketMs) byStart.set(start, emptyCounts(withEvents));
  for (const record of [...records.rolled, ...records.live]) {
    const counts = byStart.get(record.start);
    if (counts) add(counts, record);
  }
  const total = emptyCounts(withEvents);
  const buckets = [...byStart].map(([start, counts]) => {
    sum(total, counts);
    return { start: isoTime(start), live: start + range.bucketMs > records.liveFrom, ...counts };
  });
  return {
    bucket: range.bucket,
    since: isoTime(range.since),
    until: isoTime(range.until),
    workflowId,
    rolledUpUntil: isoTime(records.rolledUntil),
    liveSince: isoTime(records.liveFrom),
    buckets,
    total,
  };
}

function emptyCounts(withEvents: boolean): BucketCounts {
  return {
    executions: 0,
    triggers: 0,
    redeliveries: 0,
    fencedOut: 0,
    destinationReplays: 0,
    byStatus: { RUNNING: 0, COMPLETED: 0, FAILED: 0, CANCELLED: 0, COMPENSATING: 0, COMPENSATED: 0, COMPENSATION_FAILED: 0 },
    events: withEvents ? { received: 0, duplicates: 0 } : null,
  };
}

function add(counts: BucketCounts, r: StatsBucketRecord): void {
  counts.executions += r.executions;
  counts.triggers += r.triggers;
  counts.redeliveries += r.redeliveries;
  counts.fencedOut += r.fencedOut;
  counts.destinationReplays += r.destinationReplays;
  counts.byStatus.RUNNING += r.running;
  counts.byStatus.COMPLETED += r.completed;
  counts.byStatus.FAILED += r.failed;
  counts.byStatus.CANCELLED += r.cancelled;
  counts.byStatus.COMPENSATING += r.compensating;
  counts.byStatus.COMPENSATED += r.compensated;
  counts.byStatus.COMPENSATION_FAILED += r.compensationFailed;
  if (counts.events) {
    counts.events.received += r.eventsReceived;
    counts.events.duplicates += r.duplicateEvents;
  }
}

function sum(total: BucketCounts, counts: BucketCounts): void {
  add(total, {
    start: 0,
    executions: counts.executions,
    triggers: counts.triggers,
    redeliveries: counts.redeliveries,
    fencedOut: counts.fencedOut,
    destinationReplays: counts.destinationReplays,
    running: counts.byStatus.RUNNING,
    completed: counts.byStatus.COMPLETED,
    failed: counts.byStatus.FAILED,
    cancelled: counts.byStatus.CANCELLED,
    compensating: counts.byStatus.COMPENSATING,
    compensated: counts.byStatus.COMPENSATED,
    compensationFailed: counts.byStatus.COMPENSATION_FAILED,
    eventsReceived: counts.events?.received ?? 0,
    duplicateEvents: counts.events?.duplicates ?? 0,
  });
}
