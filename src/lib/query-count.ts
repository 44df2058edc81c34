/**
 * A D1Database that counts the queries an invocation sends — one per statement, a batch counting
 * each of its statements (the conservative reading of Workers' "1,000 D1 queries per invocation")
 * — so step chaining can stop before the limit (src/steps/chain.ts). It forwards everything to
 * the database it wraps and never answers by itself.
 *
 * One counter per invocation: wrapping a counted database again returns the same counter, so
 * whoever shares the invocation's database (a stream's polls, the inline run's budget) shares the
 * count. Work that will send queries later (a stream's remaining polls, a queue message's own
 * settle) reserves them: the budget counts a reservation as spent until it is given back.
 *
 * An invocation that works on several shards (a queue batch, a cron tick: src/shards) counts each
 * shard's database with the same tally (`countQueries(db, { sharing })`): the limit is per
 * invocation, not per database.
 */

export interface CountedD1 {
  db: D1Database;
  /** Queries sent through `db`. */
  queries(): number;
  /** Queries sent, plus those reserved and not given back: what a budget must count as spent. */
  committed(): number;
  /** Set `queries` aside for work that sends them later. */
  reserve(queries: number): QueryReservation;
}

export interface QueryReservation {
  /** `n` of the reserved queries were sent (and are counted now): the reservation shrinks by them. */
  use(n: number): void;
  /** Only `n` more are needed: the reservation shrinks to at most `n`. */
  shrinkTo(n: number): void;
  /** The rest is not needed: given back. */
  release(): void;
}

const RUNS = new Set<PropertyKey>(["first", "run", "all", "raw"]);

/** The counter of each counted database, so that counting it again shares the count. */
const counters = new WeakMap<D1Database, CountedD1>();

/** What counted databases share: the queries sent and reserved. */
interface Tally {
  queries: number;
  reserved: number;
}
const tallies = new WeakMap<CountedD1, Tally>();

export function countQueries(database: D1Database, { sharing }: { sharing?: CountedD1 } = {}): CountedD1 {
  const existing = counters.get(database);
  if (existing) return existing;
  const tally: Tally = (sharing && tallies.get(sharing)) ?? { queries: 0, reserved: 0 };
  const targets = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        if (prop === "bind")
          return (...values: unknown[]) => wrap((value as (...v: unknown[]) => D1PreparedStatement).apply(target, values));
        return (...args: unknown[]) => {
          if (RUNS.has(prop)) tally.queries += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    targets.set(proxy, statement);
    return proxy;
  };
  const db = new Proxy(database, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql));
      if (prop === "batch") {
        return (statements: D1PreparedStatement[]) => {
          tally.queries += statements.length;
          return target.batch(statements.map((s) => targets.get(s) ?? s));
        };
      }
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  const counted: CountedD1 = {
    db,
    queries: () => tally.queries,
    committed: () => tally.queries + tally.reserved,
    reserve(n) {
      let left = Math.max(0, n);
      tally.reserved += left;
      return {
        use(sent) {
          const used = Math.min(left, Math.max(0, sent));
          left -= used;
          tally.reserved -= used;
        },
        shrinkTo(most) {
          const keep = Math.min(left, Math.max(0, most));
          tally.reserved -= left - keep;
          left = keep;
        },
        release() {
          tally.reserved -= left;
          left = 0;
        },
      };
    },
  };
  counters.set(db, counted);
  tallies.set(counted, tally);
  return counted;
}
