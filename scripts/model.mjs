#!/usr/bin/env node
/**
 * The model test (test/model, docs/testing.md) with more runs than CI's:
 *   npm run test:model -- --runs 250 --seed 1000 [--ops 80] [--keep-going] [--shrink 30] [--verbose]
 *   npm run test:model -- --seed 1013,1027 --ops 80   (replays those seeds)
 * Each run is `--ops` random operations from its own seed (seed, seed+1, …); a failing seed prints
 * its operations shrunk to the fewest that still fail. Prints the wall time.
 */
import { spawnSync } from "node:child_process";

const args = process.argv.slice(2);
const value = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const flag = (name) => args.includes(`--${name}`);
const env = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
  MODEL_RUNS: value("runs") ?? "20",
  MODEL_SEED: value("seed") ?? String(Math.floor(Math.random() * 1_000_000)),
  MODEL_OPS: value("ops") ?? "40",
  MODEL_SHRINK: value("shrink") ?? "",
  MODEL_KEEP_GOING: flag("keep-going") ? "1" : "",
  MODEL_VERBOSE: flag("verbose") ? "1" : "",
};
console.log(`model: ${env.MODEL_RUNS} runs of ${env.MODEL_OPS} operations from seed ${env.MODEL_SEED}`);
const started = Date.now();
const result = spawnSync("npx", ["vitest", "run", "--project", "shard-0", "test/model/model.test.ts"], { env, stdio: "inherit" });
console.log(`model: wall time ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(result.status ?? 1);
