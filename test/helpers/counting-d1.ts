/**
 * A D1Database that forwards to the real one and counts round trips.
 *
 * Budgets in the issues are stated in round trips: one `stmt.run()/all()/first()/raw()` is one
 * round trip of one statement; one `db.batch([...])` is one round trip of N statements. The
 * real database does the work: this only counts, it never answers by itself.
 *
 * It also enforces D1's production limits (./d1-limits.ts): a statement production D1 would
 * refuse throws here, so every budget test also proves its statements fit.
 *
 * And it sums the bytes D1 returned (`bytesRead`): every value of every row that came back — a
 * string's UTF-8 bytes, a BLOB's length, 8 for a number — so a read can be held to a byte budget.
 */
import { limitedD1 } from "./d1-limits";

export interface D1Call {
  kind: "statement" | "batch" | "exec";
  sql: string[];
  /** Per statement: the rows D1 reported it wrote and read (`meta.rows_written` / `meta.rows_read`; indexes included). */
  rows?: Array<{ written: number; read: number }>;
}

export interface CountingD1 {
  db: D1Database;
  calls: D1Call[];
  /** Number of round trips since the last reset. */
  roundTrips(): number;
  /** Number of statements (a batch counts each of its statements). */
  statements(): number;
  /** Bytes of the values D1 returned since the last reset. */
  bytesRead(): number;
  /** Rows D1 reported written since the last reset (`meta.rows_written`: what D1 bills, index entries and trigger writes included). */
  rowsWritten(): number;
  /** Rows D1 reported read since the last reset (`meta.rows_read`). */
  rowsRead(): number;
  reset(): void;
}

const encoder = new TextEncoder();

/** Bytes of one returned value, as D1 holds it. */
function valueBytes(value: unknown): number {
  if (typeof value === "string") return encoder.encode(value).byteLength;
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return value.byteLength;
  if (Array.isArray(value)) return value.length; // a BLOB returned as a list of bytes
  if (typeof value === "number" || typeof value === "bigint") return 8;
  if (typeof value === "boolean") return 1;
  return 0;
}

/** Bytes of a row: an object of columns (`first`, `all`), or an array of values (`raw`). */
function rowBytes(row: unknown): number {
  if (row === null || typeof row !== "object") return valueBytes(row);
  const values = Array.isArray(row) ? (row as unknown[]) : Object.values(row);
  return values.reduce((n: number, value) => n + valueBytes(value), 0);
}

/** Bytes of what one statement returned: a `D1Result`'s rows, or a row list. */
function resultBytes(result: unknown): number {
  const rows = (result as { results?: unknown } | null)?.results;
  if (Array.isArray(rows)) return rows.reduce((n: number, row) => n + rowBytes(row), 0);
  return 0;
}

/** Where the bytes a statement returned are added up. */
interface Tally {
  bytes: number;
}

/** The rows one statement's result says it wrote and read (absent meta: none). */
function rowsOf(result: unknown): { written: number; read: number } {
  const meta = (result as { meta?: { rows_written?: number; rows_read?: number } } | null)?.meta;
  return { written: meta?.rows_written ?? 0, read: meta?.rows_read ?? 0 };
}

const REAL = Symbol("real statement");
type Wrapped = D1PreparedStatement & { [REAL]: D1PreparedStatement; sqlText: string };

export interface CountingOptions {
  /** Enforce D1's production limits (default). Off only where the count is all that is wanted (the benches). */
  enforceLimits?: boolean;
}

/**
 * A statement that records each of its round trips in `calls`. A class (methods on the prototype,
 * two fields per statement) because the benches wrap every statement the engine prepares.
 */
class CountedStatement {
  readonly [REAL]: D1PreparedStatement;
  constructor(
    stmt: D1PreparedStatement,
    readonly sqlText: string,
    private readonly calls: D1Call[],
    private readonly tally: Tally,
  ) {
    this[REAL] = stmt;
  }
  bind(...values: unknown[]): CountedStatement {
    return new CountedStatement(this[REAL].bind(...values), this.sqlText, this.calls, this.tally);
  }
  async first(column?: string): Promise<unknown> {
    // Through `all()`, the same statement, for its `meta` (a `first()` returns the row alone).
    const result = await this.all();
    const row = (result.results[0] as Record<string, unknown> | undefined) ?? null;
    if (column === undefined || row === null) return row;
    if (!Object.hasOwn(row, column)) throw new Error(`D1_COLUMN_NOTFOUND: ${column}`);
    return row[column];
  }
  async run(): Promise<D1Result> {
    const call: D1Call = { kind: "statement", sql: [this.sqlText] };
    this.calls.push(call);
    const result = await this[REAL].run();
    call.rows = [rowsOf(result)];
    this.tally.bytes += resultBytes(result);
    return result;
  }
  async all(): Promise<D1Result> {
    const call: D1Call = { kind: "statement", sql: [this.sqlText] };
    this.calls.push(call);
    const result = await this[REAL].all();
    call.rows = [rowsOf(result)];
    this.tally.bytes += resultBytes(result);
    return result;
  }
  async raw(options?: { columnNames?: boolean }): Promise<unknown[]> {
    this.calls.push({ kind: "statement", sql: [this.sqlText] });
    const rows = await this[REAL].raw(options as { columnNames: true });
    this.tally.bytes += (options?.columnNames ? rows.slice(1) : rows).reduce((n: number, row) => n + rowBytes(row), 0);
    return rows;
  }
}

export function countingD1(database: D1Database, { enforceLimits = true }: CountingOptions = {}): CountingD1 {
  const real = enforceLimits ? limitedD1(database) : database;
  const calls: D1Call[] = [];
  const tally: Tally = { bytes: 0 };

  const wrap = (stmt: D1PreparedStatement, sql: string): Wrapped => new CountedStatement(stmt, sql, calls, tally) as unknown as Wrapped;

  const db = {
    prepare: (sql: string) => wrap(real.prepare(sql), sql),
    batch: async (statements: D1PreparedStatement[]) => {
      const call: D1Call = { kind: "batch", sql: statements.map((s) => (s as Wrapped).sqlText ?? "?") };
      calls.push(call);
      const results = await real.batch(statements.map((s) => (s as Wrapped)[REAL] ?? s));
      call.rows = results.map(rowsOf);
      for (const result of results) tally.bytes += resultBytes(result);
      return results;
    },
    exec: (sql: string) => {
      calls.push({ kind: "exec", sql: [sql] });
      return real.exec(sql);
    },
    dump: () => real.dump(),
    withSession: (constraint?: string) => real.withSession(constraint),
  };

  return {
    db: db as unknown as D1Database,
    calls,
    roundTrips: () => calls.length,
    statements: () => calls.reduce((n, c) => n + c.sql.length, 0),
    bytesRead: () => tally.bytes,
    rowsWritten: () => calls.reduce((n, c) => n + (c.rows ?? []).reduce((m, r) => m + r.written, 0), 0),
    rowsRead: () => calls.reduce((n, c) => n + (c.rows ?? []).reduce((m, r) => m + r.read, 0), 0),
    reset: () => {
      calls.length = 0;
      tally.bytes = 0;
    },
  };
}
