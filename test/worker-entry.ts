/**
 * The Worker as the test suite runs it (vitest.config.ts `main`): src/index.ts, unchanged, with
 * every shard's database under D1's production limits (test/helpers/d1-limits.ts) for every fetch, queue
 * and scheduled invocation — `SELF.fetch`, real queue deliveries and cron alike. Each invocation
 * gets its own query counter (D1 allows 1,000 queries per invocation). A statement production D1
 * would refuse throws a `D1LimitError` naming the limit and the SQL, and the test fails.
 */
import engine from "../src/index";
import { limitedD1 } from "./helpers/d1-limits";
import { shardBindings } from "./helpers/shards";

/**
 * The env one invocation of the Worker gets: every shard's database under the limits, with one
 * fresh query counter for them all (the 1,000 queries are per invocation, whatever databases).
 */
export function limitedEnv(env: Env): Env {
  const invocation = { queries: 0 };
  const limited: Env = { ...env };
  for (const name of shardBindings(env)) limited[name] = limitedD1(env[name], invocation);
  return limited;
}

export default {
  fetch: (request, env, ctx) => engine.fetch(request, limitedEnv(env), ctx),
  queue: (batch, env, ctx) => engine.queue(batch, limitedEnv(env), ctx),
  scheduled: (controller, env, ctx) => engine.scheduled(controller, limitedEnv(env), ctx),
} satisfies ExportedHandler<Env>;
