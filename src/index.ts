/**
 * The idemflow Worker: HTTP (src/app.ts), the step queue consumer (src/steps), and cron
 * (src/scheduled.ts).
 */
import { app } from "./app";
import { handleStepBatch } from "./steps/consumer";
import { runScheduled } from "./scheduled";

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  queue: (batch, env, ctx) => handleStepBatch(batch, env, ctx),
  scheduled: (controller, env, ctx) => runScheduled(controller, env, ctx),
} satisfies ExportedHandler<Env>;
