/**
 * A D1Database that forwards to the real one and counts round trips.
 *
 * Budgets in the issues are stated in round trips: one `stmt.run()/all()/first()/raw()` is one
 * round trip of one statement; one `db.batch([...])` is one round trip of N statements. The
 * real database does the work: this only counts, it never answers by itself.
 *
 * It also enforces D1's production limits (./d1-limits.ts): a statement production D1 would
 * refuse throws here, so every budget test also proves its statements fit.
 */
import { limitedD1 } from "./d1-limits";

export interface D1Call {
  kind: "statement" | "batch" | "exec";
  sql: string[];
}

export interface CountingD1 {
  db: D1Database;
  calls: D1Call[];
  /** Number of round trips since the last reset. */
  roundTrips(): number;
  /** Number of statements (a batch counts each of its statements). */
  statements(): number;
  reset(): void;
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
  ) {
    this[REAL] = stmt;
  }
  bind(...values: unknown[]): CountedStatement {
    return new CountedStatement(this[REAL].bind(...values), this.sqlText, this.calls);
  }
  first(column?: string): Promise<unknown> {
    this.calls.push({ kind: "statement", sql: [this.sqlText] });
    return column === undefined ? this[REAL].first() : this[REAL].first(column);
  }
  run(): Promise<D1Result> {
    this.calls.push({ kind: "statement", sql: [this.sqlText] });
    return this[REAL].run();
  }
  all(): Promise<D1Result> {
    this.calls.push({ kind: "statement", sql: [this.sqlText] });
    return this[REAL].all();
  }
  raw(options?: { columnNames?: boolean }): Promise<unknown[]> {
    this.calls.push({ kind: "statement", sql: [this.sqlText] });
    return this[REAL].raw(options as { columnNames: true });
  }
}

export function countingD1(database: D1Database, { enforceLimits = true }: CountingOptions = {}): CountingD1 {
  const real = enforceLimits ? limitedD1(database) : database;
  const calls: D1Call[] = [];

  const wrap = (stmt: D1PreparedStatement, sql: string): Wrapped => new CountedStatement(stmt, sql, calls) as unknown as Wrapped;

  const db = {
    prepare: (sql: string) => wrap(real.prepare(sql), sql),
    batch: (statements: D1PreparedStatement[]) => {
      calls.push({ kind: "batch", sql: statements.map((s) => (s as Wrapped).sqlText ?? "?") });
      return real.batch(statements.map((s) => (s as Wrapped)[REAL] ?? s));
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
    reset: () => {
      calls.length = 0;
    },
  };
}
