/**
 * The model-based test (docs/testing.md): random operations over the real engine in virtual time,
 * every invariant checked after every operation. CI runs a fixed set of seeds; more locally:
 * `npm run test:model -- --runs 500 --seed 1000 [--ops 60]`. A failing seed prints its operations,
 * shrunk to the fewest that still fail.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { describeOps, generate, shrink, type Op } from "./ops";
import { interceptDestination, OP_TIMES, runOps } from "./world";

const vars = env as unknown as Record<string, string | undefined>;
/** CI: these seeds, this long (measured under the 90 s budget: docs/testing.md). */
const CI_SEED = 1;
const CI_RUNS = 5;
const CI_OPS = 40;

/** `MODEL_SEED`: the first seed of a range of `MODEL_RUNS`, or a list (`1013,1027`) to replay those. */
const listed = (vars.MODEL_SEED ?? "").includes(",") ? vars.MODEL_SEED!.split(",").map(Number) : null;
const seed = listed ? listed[0]! : Number(vars.MODEL_SEED || CI_SEED);
const runs = listed ? listed.length : Number(vars.MODEL_RUNS || CI_RUNS);
const seeds = listed ?? Array.from({ length: runs }, (_, i) => seed + i);
const length = Number(vars.MODEL_OPS || CI_OPS);

beforeAll(() => {
  interceptDestination();
  // The engine's log lines (one JSON line per event) cost more than the operations; MODEL_VERBOSE keeps them.
  if (!vars.MODEL_VERBOSE) vi.spyOn(console, "log").mockImplementation(() => undefined);
  if (!vars.MODEL_VERBOSE) vi.spyOn(console, "warn").mockImplementation(() => undefined);
  if (!vars.MODEL_VERBOSE) vi.spyOn(console, "error").mockImplementation(() => undefined);
});

/** The test's own lines go to stderr's original writer, past the silenced console. */
const say = (line: string) => console.info(line);

async function failure(ops: Op[]): Promise<string | null> {
  const found = await runOps(ops);
  return found ? `${found.violation.message} (at operation ${found.at})` : null;
}

describe("the model: random operations over the real engine, invariants after each", () => {
  it(
    `seeds ${listed ? listed.join(",") : `${seed}..${seed + runs - 1}`}, ${length} operations each`,
    { timeout: Math.max(120_000, runs * length * 2_000) },
    async () => {
      const started = Date.now();
      let operations = 0;
      const failures: string[] = [];
      for (const s of seeds) {
        const ops = generate(s, length);
        operations += ops.length;
        const at = Date.now();
        const found = await runOps(ops);
        if (vars.MODEL_VERBOSE || vars.MODEL_KEEP_GOING) say(`model: seed ${s} ${found ? "FAILED" : "ok"} in ${Date.now() - at} ms`);
        if (!found) continue;
        const invariant = found.violation.invariant;
        const budget = Number(vars.MODEL_SHRINK || 120);
        const shrunk = await shrink(
          ops.slice(0, found.at + 1),
          async (candidate) => (await runOps(candidate))?.violation.invariant === invariant,
          budget,
        );
        const last = await failure(shrunk);
        const report =
          `seed ${s} broke "${invariant}"\n${found.violation.message}\n\n` +
          `shrunk to ${shrunk.length} operations (${last ?? "no longer fails alone"}):\n${describeOps(shrunk)}\n\n` +
          `replay: npm run test:model -- --seed ${s} --runs 1 --ops ${length}`;
        if (!vars.MODEL_KEEP_GOING) expect.fail(report);
        say(`model: FAILED ${report}`);
        failures.push(report);
      }
      say(`model: ${runs} runs, ${operations} operations in ${((Date.now() - started) / 1000).toFixed(1)} s, ${failures.length} failed`);
      if (vars.MODEL_VERBOSE) say(`model: ms per operation kind ${JSON.stringify(OP_TIMES)}`);
      expect(failures).toEqual([]);
    },
  );
});
