/**
 * One log vocabulary for the engine: one JSON object per line, `{ …fields, level, event }`.
 *
 * `event` is a stable name (`step.fenced_out`, `reaper.redispatched`): a Workers Logs search on
 * `event` and on the ids a line carries (`executionId`, `vertexId`, `epoch`, `attempt`) finds
 * every event of one step. `message`, where present, is for a human reading the line and may be
 * reworded; branch on `event`. Every event name is in the `LogEvent` union and documented in
 * docs/logging.md. Never log a secret value: log the secret's NAME.
 */

export type LogEvent =
  // configuration (wrangler.toml [vars])
  | "config.invalid_var"
  | "config.tokens_missing"
  // HTTP
  | "http.unhandled_error"
  | "secrets.unavailable"
  // the Idempotency-Key middleware
  | "idempotency.table_missing"
  | "idempotency.claim_failed"
  | "idempotency.taken_over"
  | "idempotency.fenced_out"
  | "idempotency.completion_failed"
  | "idempotency.release_fenced_out"
  | "idempotency.release_failed"
  | "idempotency.swept"
  | "idempotency.sweep_failed"
  // ingress
  | "hook.secret_unavailable"
  | "public.refused"
  | "public.unavailable"
  | "ingress.send_failed"
  | "ingress.heal_failed"
  | "schedule.start_failed"
  | "cron.ingress_report"
  | "cron.schedules_failed"
  | "cron.identity_sweep_failed"
  | "cron.task_failed"
  // steps
  | "step.failed"
  | "step.failed_unrun"
  | "step.fenced_out"
  | "step.crashed"
  | "step.send_failed"
  | "step.heartbeat_fenced_out"
  | "step.heartbeat_failed"
  | "queue.message_malformed"
  | "queue.message_dropped"
  | "queue.message_poison"
  | "queue.execution_missing"
  | "queue.shard_unavailable"
  | "queue.dead_lettered"
  | "reaper.redispatched"
  | "reaper.failed"
  | "steps.woken"
  | "events.delivered"
  | "events.duplicate"
  | "events.id_reused"
  | "events.source_unavailable"
  // notifications (src/notifications)
  | "notifications.delivered"
  | "notifications.retrying"
  | "notifications.failed"
  | "notifications.send_failed"
  | "notifications.swept"
  // history (retention, archive, erasure)
  | "history.swept"
  | "history.archive_failed"
  | "history.erased"
  // key memory (src/keys): the retention guard read a key's cold record
  | "keys.cold_read"
  // the database's storage figures (operator)
  | "storage.high"
  // the hourly rollup of what was stopped (src/stats)
  | "stats.rolled"
  // shards (src/shards)
  | "cron.shard_skipped"
  | "shards.rows_misplaced";

export type LogLevel = "info" | "warn" | "error";

export type LogFields = Record<string, unknown>;

/** A line decided before it is written: what a periodic task's report says (src/lib/periodic-task.ts). */
export interface LogLine {
  level: LogLevel;
  event: LogEvent;
  fields: LogFields;
}

function write(level: LogLevel, event: LogEvent, fields: LogFields): void {
  // `level` and `event` last: a field can never overwrite them.
  const line = JSON.stringify({ ...fields, level, event });
  if (level === "error") console.error(line);
  else if (level === "warn") console.warn(line);
  else console.log(line);
}

export const log = {
  info: (event: LogEvent, fields: LogFields = {}): void => write("info", event, fields),
  warn: (event: LogEvent, fields: LogFields = {}): void => write("warn", event, fields),
  error: (event: LogEvent, fields: LogFields = {}): void => write("error", event, fields),
  /** Writes a line decided earlier; `null` (nothing worth saying) writes nothing. */
  line: (line: LogLine | null): void => {
    if (line) write(line.level, line.event, line.fields);
  },
};

/** The message of anything thrown: `Error.message`, else its string form. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
