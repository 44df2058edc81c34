import { expect, inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test files that reach only src/, vitest and npm packages (test/pure-files.mjs, vitest.config.ts). */
    pureTestFiles: string[];
  }
}

// A pure test file (test/pure-files.mjs: it imports nothing but src/, vitest and npm packages, and
// never names `cloudflare:`) cannot call the Worker or touch a binding: it skips this setup — the
// `cloudflare:test` import, which loads the whole Worker into the file's workerd, and the restore.
// It still runs in its own workerd, like every file.
if (!inject("pureTestFiles").includes(expect.getState().testPath ?? "")) await setUpShards();

async function setUpShards(): Promise<void> {
  const { env } = await import("cloudflare:test");
  const { limitedD1 } = await import("./helpers/d1-limits");
  const { shardBindings } = await import("./helpers/shards");

  // Storage is isolated per test file (each file runs in its own workerd, its databases empty). Every
  // shard (each its own database: wrangler.toml gives each binding its own database id) starts from
  // the migrated template vitest.config.ts built from migrations/ at the start of this run
  // (test/d1-template.ts): its schema and rows restored in one batch, instead of every migration
  // applied again in every file. test/migrations.test.ts applies the migrations themselves, in order.
  const bindings = shardBindings(env);
  await Promise.all(bindings.map((name) => env[name].batch(env.TEST_D1_TEMPLATE.statements.map((sql) => env[name].prepare(sql)))));

  // Every statement a test runs through a shard's binding — its own or the engine's, when a test
  // hands `env` to a handler directly — is held to D1's production limits (SPEC section 11). The
  // Worker's own invocations (SELF.fetch, queue, cron) are wrapped again per invocation by
  // test/worker-entry.ts.
  for (const name of bindings) env[name] = limitedD1(env[name]);

  // Project `shard-1` (vitest.config.ts) places every workspace on shard 1: the test code's `env.DB`,
  // what it seeds and reads, is then that shard's database. Shard 0's stays reachable for the tests
  // that assert it is never touched.
  if (env.TEST_DB_IS_SHARD === "1") {
    env.TEST_SHARD_0 = env.DB;
    env.DB = env.DB_1;
  }
}
