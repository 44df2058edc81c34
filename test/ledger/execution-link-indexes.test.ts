/**
 * Every column that references an execution is found by index (migrations 0009, 0016): deleting
 * or relinking an execution must not scan the executions table once per link.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";

async function plan(sql: string): Promise<string> {
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind("x").all<{ detail: string }>();
  return results.map((r) => r.detail).join("; ");
}

describe("the links between executions", () => {
  it.each([
    ["started_over_from", "executions_by_predecessor"],
    ["previous_execution_id", "executions_by_previous"],
    ["superseded_by", "executions_by_superseder"],
  ])("%s is looked up by index (%s), not by a scan", async (column, index) => {
    const detail = await plan(`SELECT id FROM executions WHERE ${column} = ?1`);
    // COVERING since migrations/0044: the index entry holds the primary key, which is the id.
    expect(detail).toMatch(new RegExp(`USING (COVERING )?INDEX ${index}\\b`));
    expect(detail).not.toMatch(/^SCAN executions$/);
  });
});
