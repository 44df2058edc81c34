/**
 * A D1Database that enforces Cloudflare D1's published limits (SPEC section 11), which local D1
 * (SQLite in workerd) does not: a statement that production D1 would refuse throws here, loudly,
 * naming the limit and the SQL, so the test that ran it fails.
 *
 * Checked on every statement:
 * - SQL text: at most 100,000 bytes;
 * - bound parameters: at most 100, each value at most 2,000,000 bytes;
 * - SQL function calls: at most 32 arguments each (`json_object(…)` counts), read from the SQL text;
 * - every returned row: each value and the row as a whole at most 2,000,000 bytes (values built
 *   inside SQL — `json_group_object`, `||` — are covered here when they come back; statements that
 *   store a built value guard it with `length(…)` in their own SQL);
 * - queries per Worker invocation: at most 1,000, when the caller passes an invocation counter
 *   (test/worker-entry.ts does, for every fetch, queue and scheduled invocation of the Worker).
 *
 * The real database does all the work; this only checks.
 */
export const D1_LIMITS = {
  maxValueBytes: 2_000_000,
  maxRowBytes: 2_000_000,
  maxSqlBytes: 100_000,
  maxBoundParameters: 100,
  maxFunctionArguments: 32,
  maxQueriesPerInvocation: 1_000,
} as const;

export class D1LimitError extends Error {
  constructor(
    readonly limit: string,
    detail: string,
    readonly sql: string,
  ) {
    super(
      `D1 limit exceeded — ${limit}: ${detail}. Production D1 refuses this statement.\nSQL: ` +
        `${sql.replace(/\s+/g, " ").trim().slice(0, 400)}`,
    );
    this.name = "D1LimitError";
  }
}

/** Counts the queries of one Worker invocation. */
export interface InvocationCounter {
  queries: number;
}

const encoder = new TextEncoder();

/** UTF-8 bytes of `text`; `upper`: a cheap upper bound instead (a UTF-16 code unit is at most 3 bytes). */
function utf8Bytes(text: string, upper = false): number {
  return upper ? text.length * 3 : encoder.encode(text).byteLength;
}

/** Bytes of a value as D1 counts them; `upper`: a cheap upper bound for strings. */
function valueBytes(value: unknown, upper = false): number {
  if (typeof value === "string") return utf8Bytes(value, upper);
  if (value instanceof ArrayBuffer) return value.byteLength;
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (Array.isArray(value)) return value.length; // a BLOB returned as a list of bytes
  if (typeof value === "number" || typeof value === "bigint") return 8;
  if (typeof value === "boolean") return 1;
  return 0;
}

const NOT_FUNCTIONS = new Set(
  (
    "select from where and or not in exists values as on using join into table index key check unique references primary " +
    "with returning case when then else end over filter set by is like glob between union all distinct order group having " +
    "limit offset do update insert delete replace conflict nothing except intersect window partition recursive view trigger"
  ).split(" "),
);

/** Blank out string literals, quoted identifiers and comments, keeping offsets. */
function codeOnly(sql: string): string {
  return sql.replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?\*\//g, (m) => " ".repeat(m.length));
}

/** Every SQL function call in `sql` with more arguments than D1 allows. */
export function oversizedFunctionCalls(sql: string): Array<{ name: string; args: number }> {
  const code = codeOnly(sql);
  const creates = /^\s*create\b/i.test(code);
  const found: Array<{ name: string; args: number }> = [];
  const call = /([A-Za-z_][A-Za-z0-9_]*)\s*\(/g;
  for (let m = call.exec(code); m !== null; m = call.exec(code)) {
    const name = m[1]!;
    if (NOT_FUNCTIONS.has(name.toLowerCase())) continue;
    const before = code.slice(0, m.index).trimEnd();
    const previous = /([A-Za-z_]+)$/.exec(before)?.[1]?.toLowerCase();
    // A column list, not a call: INSERT INTO t (…), REFERENCES t (…), CREATE INDEX … ON t (…).
    if (previous === "into" || previous === "table" || previous === "references" || previous === "exists" || (creates && previous === "on"))
      continue;
    let depth = 0;
    let args = 0;
    let empty = true;
    for (let i = m.index + m[0].length - 1; i < code.length; i++) {
      const c = code[i]!;
      if (c === "(") depth++;
      else if (c === ")") {
        depth--;
        if (depth === 0) break;
      } else if (depth === 1 && c === ",") args++;
      else if (depth === 1 && !/\s/.test(c)) empty = false;
    }
    const count = empty && args === 0 ? 0 : args + 1;
    if (count > D1_LIMITS.maxFunctionArguments) found.push({ name, args: count });
  }
  return found;
}

/** SQL texts already checked (the engine prepares the same few hundred texts again and again). */
const checkedSql = new Set<string>();

function checkSql(sql: string): void {
  if (checkedSql.has(sql)) return;
  checkSqlText(sql);
  if (checkedSql.size > 5_000) checkedSql.clear();
  checkedSql.add(sql);
}

function checkSqlText(sql: string): void {
  if (utf8Bytes(sql, true) <= D1_LIMITS.maxSqlBytes) return checkFunctionCalls(sql);
  const bytes = utf8Bytes(sql);
  if (bytes > D1_LIMITS.maxSqlBytes) {
    throw new D1LimitError("SQL statement length", `the SQL is ${bytes} bytes, over ${D1_LIMITS.maxSqlBytes}`, sql);
  }
  checkFunctionCalls(sql);
}

function checkFunctionCalls(sql: string): void {
  for (const { name, args } of oversizedFunctionCalls(sql)) {
    throw new D1LimitError(
      "arguments per SQL function",
      `${name}(…) is called with ${args} arguments, over ${D1_LIMITS.maxFunctionArguments}`,
      sql,
    );
  }
}

function checkBindings(sql: string, values: unknown[]): void {
  if (values.length > D1_LIMITS.maxBoundParameters) {
    throw new D1LimitError("bound parameters per query", `${values.length} values are bound, over ${D1_LIMITS.maxBoundParameters}`, sql);
  }
  values.forEach((value, i) => {
    if (valueBytes(value, true) <= D1_LIMITS.maxValueBytes) return;
    const bytes = valueBytes(value);
    if (bytes > D1_LIMITS.maxValueBytes) {
      throw new D1LimitError(
        "string, BLOB or row size",
        `bound parameter ${i + 1} is ${bytes} bytes, over ${D1_LIMITS.maxValueBytes}`,
        sql,
      );
    }
  });
}

function checkRow(sql: string, row: unknown): void {
  const values = Array.isArray(row) ? row : row !== null && typeof row === "object" ? Object.values(row) : [row];
  // The cheap upper bound first; the exact size only when the bound says it could matter.
  if (values.reduce((n: number, value) => n + valueBytes(value, true), 0) <= D1_LIMITS.maxRowBytes) return;
  let total = 0;
  for (const value of values) {
    const bytes = valueBytes(value);
    if (bytes > D1_LIMITS.maxValueBytes) {
      throw new D1LimitError("string, BLOB or row size", `a returned value is ${bytes} bytes, over ${D1_LIMITS.maxValueBytes}`, sql);
    }
    total += bytes;
  }
  if (total > D1_LIMITS.maxRowBytes) {
    throw new D1LimitError("string, BLOB or row size", `a returned row is ${total} bytes, over ${D1_LIMITS.maxRowBytes}`, sql);
  }
}

function checkResult(sql: string, result: unknown): void {
  const rows = (result as { results?: unknown[] } | null)?.results;
  if (Array.isArray(rows)) for (const row of rows) checkRow(sql, row);
}

const INNER = Symbol("the database under the limits");
const REAL = Symbol("real statement");
type Limited = D1PreparedStatement & { [REAL]: D1PreparedStatement; sqlText: string };

/** True when `db` already enforces the limits. */
export function isLimited(db: D1Database): boolean {
  return (db as unknown as { [INNER]?: D1Database })[INNER] !== undefined;
}

/**
 * `real` under D1's limits. Idempotent: a database that already enforces them is unwrapped first,
 * so wrapping again (to add an invocation counter) never checks twice.
 */
export function limitedD1(db: D1Database, invocation?: InvocationCounter): D1Database {
  const real = (db as unknown as { [INNER]?: D1Database })[INNER] ?? db;

  const countQueries = (sql: string, n: number) => {
    if (!invocation) return;
    invocation.queries += n;
    if (invocation.queries > D1_LIMITS.maxQueriesPerInvocation) {
      throw new D1LimitError(
        "queries per Worker invocation",
        `this invocation ran ${invocation.queries} queries, over ${D1_LIMITS.maxQueriesPerInvocation}`,
        sql,
      );
    }
  };

  const wrap = (stmt: D1PreparedStatement, sql: string): Limited => {
    const run = async <T>(execute: () => Promise<T>, check: (value: T) => void): Promise<T> => {
      countQueries(sql, 1);
      const value = await execute();
      check(value);
      return value;
    };
    const wrapped = {
      [REAL]: stmt,
      sqlText: sql,
      bind: (...values: unknown[]) => {
        checkBindings(sql, values);
        return wrap(stmt.bind(...values), sql);
      },
      first: (column?: string) =>
        run(
          () => (column === undefined ? stmt.first() : stmt.first(column)),
          (row) => {
            if (row !== null) checkRow(sql, row);
          },
        ),
      run: () =>
        run(
          () => stmt.run(),
          (result) => checkResult(sql, result),
        ),
      all: () =>
        run(
          () => stmt.all(),
          (result) => checkResult(sql, result),
        ),
      raw: (options?: { columnNames?: boolean }) =>
        run(
          () => stmt.raw(options as { columnNames: true }),
          (rows) => {
            for (const row of (rows as unknown[]).slice(options?.columnNames ? 1 : 0)) checkRow(sql, row);
          },
        ),
    };
    return wrapped as unknown as Limited;
  };

  const limited = {
    [INNER]: real,
    prepare: (sql: string) => {
      checkSql(sql);
      return wrap(real.prepare(sql), sql);
    },
    batch: async (statements: D1PreparedStatement[]) => {
      const sqls = statements.map((s) => (s as Limited).sqlText ?? "?");
      countQueries(sqls.join("; "), statements.length);
      const results = await real.batch(statements.map((s) => (s as Limited)[REAL] ?? s));
      results.forEach((result, i) => checkResult(sqls[i] ?? "?", result));
      return results;
    },
    exec: (sql: string) => {
      countQueries(sql, sql.split(";").filter((s) => s.trim() !== "").length);
      return real.exec(sql);
    },
    dump: () => real.dump(),
    withSession: (constraint?: string) => real.withSession(constraint),
  };
  return limited as unknown as D1Database;
}
