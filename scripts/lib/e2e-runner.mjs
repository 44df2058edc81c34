/**
 * How `npm run e2e` runs its stories and reports them (scripts/e2e.mjs). Robust under load:
 *
 * - The start (migrations, both workers up and healthy, the OpenAPI document read) has its own,
 *   generous timeout and its own time in the report; the stories' clock starts after it.
 * - Each story runs within its own budget. A story that overruns fails alone ("overran its budget")
 *   and the next one runs; what it still had in flight is aborted at its next request or wait (its
 *   AbortSignal, `storySignal()`, reaches every request and poll of the e2e's helpers). Nothing is retried.
 * - The stories together have a cap too (a machine so slow that every story overruns must not hold CI
 *   for hours): once it is spent, the stories left are reported as not run, each by name, and count as failed.
 * - The closing line `N passed, N failed` is ALWAYS printed, alone on its line, and the exit code is
 *   non-zero iff something failed: after the last story, when the start fails or times out, on
 *   SIGINT/SIGTERM, and on an unexpected exception (a failure each).
 *
 * Budgets, in milliseconds, from the environment: `E2E_START_MS` (default 600,000), `E2E_STORY_MS`
 * (default 180,000, per story), `E2E_STORIES_MS` (default 2,400,000, all stories): the whole run is
 * bounded by about 50 minutes, well inside CI's 90, and normally takes a few.
 */
import { AsyncLocalStorage } from "node:async_hooks";

const fromEnv = (name, fallback) => {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
};
export const BUDGETS = {
  startMs: fromEnv("E2E_START_MS", 600_000),
  storyMs: fromEnv("E2E_STORY_MS", 180_000),
  storiesMs: fromEnv("E2E_STORIES_MS", 2_400_000),
};

const seconds = (ms) => `${(ms / 1000).toFixed(1)}s`;

/**
 * `log(line)` prints; `only(name)` says whether a story runs at all (E2E_ONLY); `onFailure()` prints
 * what helps after a failure (the workers' logs); `shutdown(code)` stops everything and exits.
 */
export function storyRunner({ log, only = () => true, budgets = BUDGETS, onFailure = () => {}, shutdown }) {
  const results = [];
  const storyContext = new AsyncLocalStorage();
  const t0 = Date.now();
  let startMs = null;
  let storiesStartedAt = null;
  let storiesMs = 0;
  /** Why no further story runs (a failed essential story, the stories' cap spent). */
  let stopped = null;
  /** The story running now: `{ name, t0 }`. */
  let current = null;
  let finishing = null;

  const fail = (name, why) => {
    results.push({ name, ok: false });
    log(`  ✗ ${name}\n      ${String(why).split("\n").join("\n      ")}`);
  };

  /** The running story's AbortSignal (aborted when it overruns), combined with a timeout of `timeoutMs` when given. */
  function storySignal(timeoutMs) {
    const signal = storyContext.getStore()?.signal;
    const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
    if (signal && timeout) return AbortSignal.any([signal, timeout]);
    return signal ?? timeout;
  }

  /**
   * The start: `fn` within `budgets.startMs` (it gets the time left, `left()`, for its own waits).
   * Its time is reported apart from the stories'. When it fails or times out, the run finishes here.
   */
  async function start(fn) {
    const deadline = Date.now() + budgets.startMs;
    let timer;
    try {
      await Promise.race([
        fn({ left: () => Math.max(1_000, deadline - Date.now()) }),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`the start did not finish within ${seconds(budgets.startMs)} (E2E_START_MS raises it)`)),
            budgets.startMs,
          );
        }),
      ]);
      startMs = Date.now() - t0;
      log(`e2e: started in ${seconds(startMs)}; the stories' clock starts now`);
    } catch (error) {
      startMs = Date.now() - t0;
      fail(`the start (migrations, both workers healthy, the OpenAPI document), after ${seconds(startMs)}`, error.message);
      onFailure();
      await finish();
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One story: `fn` within its budget (`budgetMs`, default `budgets.storyMs`, never past the stories' cap).
   * `essential`: every later story needs it, so when it fails they are reported as not run.
   */
  async function test(name, fn, { budgetMs = budgets.storyMs, essential = false } = {}) {
    if (!only(name)) return;
    storiesStartedAt ??= Date.now();
    const left = storiesStartedAt + budgets.storiesMs - Date.now();
    if (!stopped && left <= 0) stopped = `the stories' cap of ${seconds(budgets.storiesMs)} was spent (E2E_STORIES_MS raises it)`;
    if (stopped) {
      results.push({ name, ok: false });
      log(`  ✗ ${name} (not run: ${stopped})`);
      return;
    }
    const budget = Math.min(budgetMs, left);
    const controller = new AbortController();
    const began = Date.now();
    current = { name, t0: began };
    let timer;
    try {
      const running = storyContext.run({ signal: controller.signal }, fn);
      // An overrun story's late rejection (its aborted requests) is no one's: it already failed.
      running.catch(() => {});
      await Promise.race([
        running,
        new Promise((_, reject) => {
          timer = setTimeout(() => {
            const overrun = new Error(
              `overran its budget of ${seconds(budget)}: stopped, the next story runs` +
                (budget < budgetMs ? " (the stories' cap was reached)" : " (E2E_STORY_MS raises it)"),
            );
            controller.abort(overrun);
            reject(overrun);
          }, budget);
        }),
      ]);
      results.push({ name, ok: true });
      log(`  ✓ ${name} (${seconds(Date.now() - began)})`);
    } catch (error) {
      fail(`${name} (${seconds(Date.now() - began)})`, error?.message ?? error);
      if (essential) stopped = `"${name}" failed, and every later story needs it`;
    } finally {
      clearTimeout(timer);
      current = null;
      storiesMs = Date.now() - storiesStartedAt;
    }
  }

  /**
   * The end of every run: the times, then `N passed, N failed` alone on its line; exits non-zero iff
   * something failed. `interrupted`: why the run ends early (a signal, an unexpected exception) — a
   * failure, charged to the story running then if any. Runs once; later calls wait for the first.
   */
  function finish({ interrupted, code } = {}) {
    finishing ??= (async () => {
      if (interrupted) {
        if (current) fail(`${current.name} (${seconds(Date.now() - current.t0)})`, `interrupted: ${interrupted}`);
        else fail("the run", `interrupted: ${interrupted}`);
        onFailure();
      }
      if (storiesStartedAt) storiesMs = Date.now() - storiesStartedAt;
      const passed = results.filter((r) => r.ok).length;
      const failed = results.length - passed;
      log(
        `\ne2e: start ${startMs === null ? "not finished" : seconds(startMs)}, stories ${seconds(storiesMs)}, ` +
          `total ${seconds(Date.now() - t0)} (budgets: start ${seconds(budgets.startMs)}, ` +
          `each story ${seconds(budgets.storyMs)}, all stories ${seconds(budgets.storiesMs)})`,
      );
      log(`${passed} passed, ${failed} failed`);
      await shutdown(code ?? (failed > 0 ? 1 : 0));
    })();
    return finishing;
  }

  return { test, start, finish, storySignal, failed: () => results.some((r) => !r.ok) };
}
