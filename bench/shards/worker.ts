/**
 * The idemflow engine as `npm run bench:shards` runs it: src/index.ts, unchanged, behind a thin
 * entry that wraps every shard's D1 binding (the names in `env.D1_SHARDS`, "DB" when unset) with
 * one instrument per shard, and nothing else.
 *
 * 1. Counting, always: statements, round trips, batches, and what D1 reports in each result's
 *    `meta` (`rows_written`, `rows_read`, `duration`), per shard. A `first()` without a column is
 *    sent as `all()` (the same statement, its first row returned) so that its `meta` is seen too;
 *    `first(column)` and `raw()` return no `meta` and are counted as statements only.
 * 2. With `BENCH_SHARD_DELAY_MS` > 0, a simulated single-threaded primary per shard: the shard's
 *    round trips run one at a time (a FIFO gate per database), and each holds the gate for the
 *    delay × its statements before the real database runs it. Each shard has its own gate, so the
 *    simulation serialises within a shard and never across shards: whatever serialises across
 *    shards in the measurement is the engine's (or the local runtime's), not the instrument's.
 *
 * `GET /__bench/shards` reads the per-shard counters (and the gate's busy and waiting time, and
 * the step-queue messages the engine sent); `POST /__bench/shards/reset` zeroes them;
 * `GET /__bench/executions?workflowId=…` summarises each shard's executions of one workflow per
 * workspace, read on the raw bindings (neither counted nor delayed), so the driver's polls never
 * touch the figures. The counters live in isolate memory: `wrangler dev` serves this Worker from one
 * isolate, which is all a local bench needs (never do this for state the engine relies on).
 */
import engine from "../../src/index";
import { countingQueue } from "../lib/counting-queue";

interface ShardStats {
  statements: number;
  roundTrips: number;
  batches: number;
  /** Statements whose result carried `meta` (all of them but `first(column)` and `raw()`). */
  withMeta: number;
  rowsWritten: number;
  rowsRead: number;
  /** The sum of `meta.duration` (ms): the SQL time D1 reports. */
  sqlMs: number;
  /** Statements whose `meta.duration` was above zero. */
  sqlNonZero: number;
  /** Time the gate was held (delay + the real call), ms; 0 without a delay. */
  busyMs: number;
  /** Time round trips waited for the gate, summed, ms. */
  waitMs: number;
  /** The longest queue of round trips in front of the gate. */
  maxWaiting: number;
}

const emptyStats = (): ShardStats => ({
  statements: 0,
  roundTrips: 0,
  batches: 0,
  withMeta: 0,
  rowsWritten: 0,
  rowsRead: 0,
  sqlMs: 0,
  sqlNonZero: 0,
  busyMs: 0,
  waitMs: 0,
  maxWaiting: 0,
});

/** One round trip at a time, in arrival order, each holding the gate for its delay and its call. */
class Gate {
  #tail: Promise<void> = Promise.resolve();
  #waiting = 0;
  constructor(private readonly stats: ShardStats) {}

  async run<T>(delayMs: number, call: () => Promise<T>): Promise<T> {
    if (delayMs <= 0) return call();
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    this.#waiting++;
    this.stats.maxWaiting = Math.max(this.stats.maxWaiting, this.#waiting);
    const queuedAt = performance.now();
    await previous;
    this.#waiting--;
    const startedAt = performance.now();
    this.stats.waitMs += startedAt - queuedAt;
    try {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return await call();
    } finally {
      this.stats.busyMs += performance.now() - startedAt;
      release();
    }
  }
}

interface Meta {
  rows_written?: number;
  rows_read?: number;
  duration?: number;
}

function record(stats: ShardStats, meta: Meta | undefined): void {
  if (!meta) return;
  stats.withMeta++;
  stats.rowsWritten += meta.rows_written ?? 0;
  stats.rowsRead += meta.rows_read ?? 0;
  stats.sqlMs += meta.duration ?? 0;
  if ((meta.duration ?? 0) > 0) stats.sqlNonZero++;
}

const REAL = Symbol("real statement");

/** A statement whose round trips go through its shard's gate and counters. */
class ShardStatement {
  readonly [REAL]: D1PreparedStatement;
  constructor(
    stmt: D1PreparedStatement,
    private readonly shard: Shard,
  ) {
    this[REAL] = stmt;
  }
  bind(...values: unknown[]): ShardStatement {
    return new ShardStatement(this[REAL].bind(...values), this.shard);
  }
  async first(column?: string): Promise<unknown> {
    const { shard } = this;
    shard.count(1, false);
    if (column !== undefined) return shard.gate.run(shard.delayMs(1), () => this[REAL].first(column));
    const result = await shard.gate.run(shard.delayMs(1), () => this[REAL].all());
    record(shard.stats, result.meta as Meta);
    return result.results[0] ?? null;
  }
  run(): Promise<D1Result> {
    return this.#result(() => this[REAL].run());
  }
  all(): Promise<D1Result> {
    return this.#result(() => this[REAL].all());
  }
  async #result(call: () => Promise<D1Result>): Promise<D1Result> {
    const { shard } = this;
    shard.count(1, false);
    const result = await shard.gate.run(shard.delayMs(1), call);
    record(shard.stats, result.meta as Meta);
    return result;
  }
  async raw(options?: { columnNames?: boolean }): Promise<unknown[]> {
    const { shard } = this;
    shard.count(1, false);
    return shard.gate.run(shard.delayMs(1), () => this[REAL].raw(options as { columnNames: true }));
  }
}

/** One shard's instrument: its counters, its gate, and the wrapped database the engine sees. */
class Shard {
  stats = emptyStats();
  readonly gate: Gate;
  readonly db: D1Database;
  delay = 0;

  constructor(
    readonly name: string,
    readonly real: D1Database,
  ) {
    this.gate = new Gate(this.stats);
    const wrap = (stmt: D1PreparedStatement) => new ShardStatement(stmt, this) as unknown as D1PreparedStatement;
    this.db = {
      prepare: (sql: string) => wrap(real.prepare(sql)),
      batch: async (statements: D1PreparedStatement[]) => {
        this.count(statements.length, true);
        const unwrapped = statements.map((s) => (s as unknown as ShardStatement)[REAL] ?? s);
        const results = await this.gate.run(this.delayMs(statements.length), () => real.batch(unwrapped));
        for (const result of results) record(this.stats, result.meta as Meta);
        return results;
      },
      exec: (sql: string) => {
        this.count(1, false);
        return this.gate.run(this.delayMs(1), () => real.exec(sql));
      },
      dump: () => real.dump(),
      withSession: (constraint?: string) => real.withSession(constraint),
    } as unknown as D1Database;
  }

  count(statements: number, batch: boolean): void {
    this.stats.statements += statements;
    this.stats.roundTrips++;
    if (batch) this.stats.batches++;
  }

  delayMs(statements: number): number {
    return this.delay * statements;
  }

  reset(): void {
    // The gate keeps its reference: zero the fields in place.
    Object.assign(this.stats, emptyStats());
  }
}

type BenchEnv = Env & Record<string, unknown> & { BENCH_SHARD_DELAY_MS?: string; D1_SHARDS?: string };

/** One instrument per binding name, made on first use and kept for the isolate's life. */
const shards = new Map<string, Shard>();
let queueMessages = 0;
let countedQueue: Env["QUEUE"] | undefined;
let resetAt = Date.now();

function shardNames(env: BenchEnv): string[] {
  return (env.D1_SHARDS ?? "DB")
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
}

function instrumented(env: BenchEnv): Env {
  const delay = Math.max(0, Number(env.BENCH_SHARD_DELAY_MS ?? "0") || 0);
  const wrapped: Record<string, unknown> = {};
  for (const name of shardNames(env)) {
    let shard = shards.get(name);
    if (!shard) {
      shard = new Shard(name, env[name] as D1Database);
      shards.set(name, shard);
    }
    shard.delay = delay;
    wrapped[name] = shard.db;
  }
  countedQueue ??= countingQueue(env.QUEUE, (n) => (queueMessages += n));
  return { ...env, ...wrapped, QUEUE: countedQueue } as Env;
}

interface ExecutionRow {
  workspace: string;
  status: string;
  n: number;
  first_created: number | null;
  last_finished: number | null;
}

async function benchRoute(request: Request, env: BenchEnv): Promise<Response> {
  const url = new URL(request.url);
  const names = shardNames(env);
  if (url.pathname === "/__bench/shards" && request.method === "GET") {
    return Response.json({
      shards: names.map((name, index) => ({ index, name, ...(shards.get(name)?.stats ?? emptyStats()) })),
      queueMessages,
      sinceMs: Date.now() - resetAt,
      delayMs: Number(env.BENCH_SHARD_DELAY_MS ?? "0") || 0,
    });
  }
  if (url.pathname === "/__bench/shards/reset" && request.method === "POST") {
    for (const shard of shards.values()) shard.reset();
    queueMessages = 0;
    resetAt = Date.now();
    return Response.json({ ok: true });
  }
  // Each shard's executions of one workflow, per workspace and status, on the raw binding.
  if (url.pathname === "/__bench/executions" && request.method === "GET") {
    const workflowId = url.searchParams.get("workflowId") ?? "";
    const perShard = await Promise.all(
      names.map(async (name, index) => {
        const { results } = await (env[name] as D1Database)
          .prepare(
            `SELECT workspace, status, count(*) AS n, min(created_at) AS first_created, max(finished_at) AS last_finished
               FROM executions WHERE workflow_id = ? GROUP BY workspace, status`,
          )
          .bind(workflowId)
          .all<ExecutionRow>();
        return { index, name, rows: results };
      }),
    );
    return Response.json({ shards: perShard });
  }
  return Response.json({ error: "unknown bench route" }, { status: 404 });
}

export default {
  fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/__bench/")) return benchRoute(request, env as BenchEnv);
    return engine.fetch(request, instrumented(env as BenchEnv), ctx);
  },
  queue: (batch, env, ctx) => engine.queue(batch, instrumented(env as BenchEnv), ctx),
  scheduled: (controller, env, ctx) => engine.scheduled(controller, instrumented(env as BenchEnv), ctx),
} satisfies ExportedHandler<Env>;
