/**
 * The idemflow Worker: HTTP (src/app.ts), the queue (src/queue.ts: steps and history sweep continuations), and cron
 * (src/scheduled.ts).
 */
import { app } from "./app";
import { handleQueueBatch } from "./queue";
import { runScheduled } from "./scheduled";

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),
  queue: (batch, env, ctx) => handleQueueBatch(batch, env, ctx),
  scheduled: (controller, env, ctx) => runScheduled(controller, env, ctx),
} satisfies ExportedHandler<Env>;
