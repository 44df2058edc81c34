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
