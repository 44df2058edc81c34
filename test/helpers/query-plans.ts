/**
 * EXPLAIN QUERY PLAN for the plan tests: a statement's plan lines (every `?N` bound to a
 * placeholder — a plan depends on the shape, not the values), and the tables it scans.
 */
import { env } from "cloudflare:test";

/** The plan's lines of `sql`, each numbered parameter bound to `bind` (a JSON array fits `json_each`). */
export async function planOf(sql: string, bind: string = "[]"): Promise<string[]> {
  const params = Math.max(0, ...[...sql.matchAll(/\?(\d+)/g)].map((m) => Number(m[1])));
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...Array.from({ length: params }, () => bind))
    .all<{ detail: string }>();
  return results.map((r) => r.detail);
}

/** The lines of `plan` that scan one of `tables` (a full pass over a table, not a search of an index). */
export function scansOf(plan: readonly string[], tables: readonly string[]): string[] {
  return plan.filter((line) => tables.some((table) => new RegExp(`^SCAN ${table}( |$)`).test(line)));
}

/**
 * The body of each named trigger (or every trigger) as a statement whose plan can be read: its
 * `NEW.x` and `OLD.x` become numbered parameters. Every trigger body is one statement
 * (migrations/0017, 0021, 0024: the shape wrangler's splitter keeps whole).
 */
export async function triggerBodies(names?: readonly string[]): Promise<Array<{ name: string; table: string; sql: string }>> {
  const { results } = await env.DB.prepare(
    "SELECT name, tbl_name AS \"table\", sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name",
  ).all<{
    name: string;
    table: string;
    sql: string;
  }>();
  const wanted = names ? results.filter((r) => names.includes(r.name)) : results;
  return wanted.map(({ name, table, sql }) => {
    const body = /\bBEGIN\s+([\s\S]*?);\s*END\s*$/.exec(sql)?.[1];
    if (!body) throw new Error(`trigger ${name}: no one-statement body in ${sql}`);
    let n = 0;
    const params = new Map<string, string>();
    const statement = body.replace(/\b(NEW|OLD|new|old)\.(\w+)/g, (ref) => {
      if (!params.has(ref)) params.set(ref, `?${++n}`);
      return params.get(ref)!;
    });
    return { name, table, sql: statement };
  });
}

/**
 * The tables that grow with executions, their steps, attempts and events: no query of the engine may
 * scan one (the plan tests of test/history, test/stats, test/ledger/events-plans and the trace's).
 * `step_attempts` is a view over `step_attempt_rows` and the step rows (migrations/0042): both named.
 */
export const GROWING_TABLES: readonly string[] = [
  "executions",
  "steps",
  "step_attempts",
  "step_attempt_rows",
  "step_events",
  "destination_key_sends",
  "work_items",
  "burnt_keys",
  "notification_outbox",
  "execution_tombstones",
  "dead_letters",
  "execution_identities",
  "events",
  "event_waits",
  "event_consumptions",
  "identity_values",
];
