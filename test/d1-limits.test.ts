/**
 * The enforcing D1 wrapper (test/helpers/d1-limits.ts) that every statement of the suite runs
 * through: each of D1's published limits throws, naming the limit and the SQL.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { D1_LIMITS, D1LimitError, isLimited, limitedD1, oversizedFunctionCalls } from "./helpers/d1-limits";
import { countingD1 } from "./helpers/counting-d1";
import { limitedEnv } from "./worker-entry";

describe("the enforcing D1 wrapper", () => {
  it("is what tests hand to the engine: env.DB and the counting wrapper enforce the limits", () => {
    expect(isLimited(env.DB)).toBe(true);
    expect(isLimited(limitedD1(env.DB))).toBe(true);
  });

  it("refuses SQL over 100,000 bytes", async () => {
    const sql = `SELECT 1 /* ${"x".repeat(D1_LIMITS.maxSqlBytes)} */`;
    expect(() => env.DB.prepare(sql)).toThrow(/SQL statement length.*over 100000/);
  });

  it("refuses more than 100 bound parameters", () => {
    const sql = `SELECT ${Array.from({ length: 101 }, () => "?").join(" + ")}`;
    expect(() => env.DB.prepare(sql).bind(...Array.from({ length: 101 }, () => 1))).toThrow(/bound parameters per query: 101 values/);
    expect(() => env.DB.prepare(sql.replace(/ \+ \?$/, "")).bind(...Array.from({ length: 100 }, () => 1))).not.toThrow();
  });

  it("refuses a bound value over 2,000,000 bytes (UTF-8 bytes, not characters)", () => {
    const stmt = env.DB.prepare("SELECT length(?1)");
    expect(() => stmt.bind("x".repeat(2_000_001))).toThrow(/string, BLOB or row size: bound parameter 1 is 2000001 bytes/);
    expect(() => stmt.bind("é".repeat(1_000_001))).toThrow(/2000002 bytes/);
    expect(() => stmt.bind("x".repeat(2_000_000))).not.toThrow();
  });

  it("refuses a value built and returned by SQL over 2,000,000 bytes, and a row over it", async () => {
    await expect(env.DB.prepare("SELECT replace(hex(zeroblob(2000001)), '00', 'x') AS v").first()).rejects.toThrow(
      /a returned value is 2000001 bytes/,
    );
    await expect(
      env.DB.prepare("SELECT replace(hex(zeroblob(1000000)), '00', 'x') AS a, replace(hex(zeroblob(1000001)), '00', 'y') AS b").all(),
    ).rejects.toThrow(/a returned row is 2000001 bytes/);
    const counting = countingD1(env.DB);
    await expect(counting.db.batch([counting.db.prepare("SELECT replace(hex(zeroblob(2000001)), '00', 'x') AS v")])).rejects.toThrow(
      D1LimitError,
    );
  });

  it("refuses a SQL function called with more than 32 arguments (json_object counts)", () => {
    const args = (n: number) => Array.from({ length: n }, (_, i) => `'k${i}', ${i}`).join(", ");
    expect(() => env.DB.prepare(`SELECT json_object(${args(17)})`)).toThrow(
      /arguments per SQL function: json_object\(…\) is called with 34 arguments/,
    );
    expect(() => env.DB.prepare(`SELECT json_object(${args(16)})`)).not.toThrow();
    // Column lists and IN lists are not function calls; strings are not SQL.
    const columns = Array.from({ length: 40 }, (_, i) => `c${i}`).join(", ");
    expect(oversizedFunctionCalls(`INSERT INTO t (${columns}) VALUES (${columns})`)).toEqual([]);
    expect(oversizedFunctionCalls(`SELECT 1 WHERE x IN (${columns})`)).toEqual([]);
    expect(oversizedFunctionCalls(`SELECT 'f(${columns})'`)).toEqual([]);
  });

  it("refuses more than 1,000 queries in one invocation", async () => {
    const db = limitedD1(env.DB, { queries: 0 });
    await db.batch(Array.from({ length: 999 }, () => db.prepare("SELECT 1")));
    await db.prepare("SELECT 1").first();
    await expect(db.prepare("SELECT 1").first()).rejects.toThrow(/queries per Worker invocation: this invocation ran 1001 queries/);
  });

  it("wraps the Worker's own env.DB per invocation (test/worker-entry.ts, the pool's `main`)", async () => {
    const first = limitedEnv(env);
    expect(isLimited(first.DB)).toBe(true);
    await first.DB.batch(Array.from({ length: 1_000 }, () => first.DB.prepare("SELECT 1")));
    await expect(first.DB.prepare("SELECT 1").first()).rejects.toThrow(/queries per Worker invocation/);
    // The next invocation counts from zero.
    await expect(limitedEnv(env).DB.prepare("SELECT 1").first()).resolves.toEqual({ 1: 1 });
  });
});
