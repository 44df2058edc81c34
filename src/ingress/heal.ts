/**
 * Incoming traffic heals lost step messages. The steps reaper (src/steps/reaper.ts) re-sends
 * DISPATCHED steps whose message was lost, but it otherwise runs only after a queue batch or on
 * the cron tick: under `wrangler dev` a stalled local queue delivers no batch, and cron may be
 * late or absent, so a lost message would sit until then. Every trigger request therefore also
 * offers the steps module's opportunistic reap — the same entry and the same per-isolate throttle
 * as after a queue batch (`maybeReap`), so this costs at most one bounded sweep per isolate per
 * `reapEveryMs`, whatever the request rate.
 *
 * It runs after the response is built, inside `waitUntil`, and nothing it does can delay or fail
 * the answer: `maybeReap` catches and logs a failed sweep; this catches anything thrown before.
 */
import { maybeReap } from "../steps/reaper";
import { defaultRuntime } from "../steps/runtime";
import { errorMessage, log } from "../lib/log";

export function healLostStepMessages(env: Env, ctx: ExecutionContext): void {
  try {
    maybeReap(defaultRuntime(env), ctx);
  } catch (error) {
    log.error("ingress.heal_failed", { message: "opportunistic reap after a trigger failed to start", error: errorMessage(error) });
  }
}
