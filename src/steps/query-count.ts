/**
 * A D1Database that counts the queries an invocation sends — one per statement, a batch counting
 * each of its statements (the conservative reading of Workers' "1,000 D1 queries per invocation")
 * — so step chaining can stop before the limit (src/steps/chain.ts). It forwards everything to
 * the database it wraps and never answers by itself.
 */

export interface CountedD1 {
  db: D1Database;
  queries(): number;
}

const RUNS = new Set<PropertyKey>(["first", "run", "all", "raw"]);

export function countQueries(database: D1Database): CountedD1 {
  let queries = 0;
  const targets = new WeakMap<object, D1PreparedStatement>();
  const wrap = (statement: D1PreparedStatement): D1PreparedStatement => {
    const proxy = new Proxy(statement, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        if (prop === "bind")
          return (...values: unknown[]) => wrap((value as (...v: unknown[]) => D1PreparedStatement).apply(target, values));
        return (...args: unknown[]) => {
          if (RUNS.has(prop)) queries += 1;
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
          queries += statements.length;
          return target.batch(statements.map((s) => targets.get(s) ?? s));
        };
      }
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { db, queries: () => queries };
}
