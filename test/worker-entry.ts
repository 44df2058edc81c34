/**
 * The Worker as the test suite runs it (vitest.config.ts `main`): src/index.ts, unchanged, with
 * its `env.DB` under D1's production limits (test/helpers/d1-limits.ts) for every fetch, queue
 * and scheduled invocation — `SELF.fetch`, real queue deliveries and cron alike. Each invocation
 * gets its own query counter (D1 allows 1,000 queries per invocation). A statement production D1
 * would refuse throws a `D1LimitError` naming the limit and the SQL, and the test fails.
 */
import engine from "../src/index";
import { limitedD1 } from "./helpers/d1-limits";

/** The env one invocation of the Worker gets: its DB under the limits, with a fresh query counter. */
export function limitedEnv(env: Env): Env {
  return { ...env, DB: limitedD1(env.DB, { queries: 0 }) };
}

export default {
  fetch: (request, env, ctx) => engine.fetch(request, limitedEnv(env), ctx),
  queue: (batch, env, ctx) => engine.queue(batch, limitedEnv(env), ctx),
  scheduled: (controller, env, ctx) => engine.scheduled(controller, limitedEnv(env), ctx),
} satisfies ExportedHandler<Env>;
