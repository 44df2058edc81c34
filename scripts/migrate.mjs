#!/usr/bin/env node
/**
 * Apply the engine's D1 migrations to EVERY shard (SPEC section 13, docs/shards.md), in shard order.
 *
 *   npm run migrate:local                        the local databases of `npm start` (.wrangler/state)
 *   npm run migrate:remote                       the production databases: run it before `wrangler deploy`
 *   … -- --persist-to DIR | --env NAME | -c FILE   another local state directory, wrangler environment, config
 *
 * The shards are the bindings the var `D1_SHARDS` lists, each mapped to its `[[d1_databases]]` block's
 * database_name in wrangler.toml (scripts/lib/shards.mjs). The first failure stops the run with the
 * shard it happened on: the engine refuses a shard whose applied migrations lag its own (503
 * `shard-schema-behind`), so never deploy after a partial run; run it again once the cause is fixed.
 */
import { isAbsolute, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { describeShard, migrateShards, readShards } from "./lib/shards.mjs";
import { ROOT } from "./lib/wrangler-dev.mjs";

const usage = "usage: node scripts/migrate.mjs --local|--remote [--persist-to DIR] [--env NAME] [-c wrangler.toml]";
const say = (line = "") => process.stdout.write(`${line}\n`);
const fail = (message) => {
  process.stderr.write(`\nmigrate: ${message}\n`);
  process.exit(1);
};

let options;
try {
  ({ values: options } = parseArgs({
    options: {
      local: { type: "boolean", default: false },
      remote: { type: "boolean", default: false },
      "persist-to": { type: "string" },
      env: { type: "string" },
      config: { type: "string", short: "c" },
    },
  }));
} catch (error) {
  fail(`${error.message}\n${usage}`);
}
if (options.local === options.remote) fail(`say where: --local or --remote (exactly one).\n${usage}`);
if (options.remote && options["persist-to"]) fail("--persist-to is for --local only");

const config = options.config ? resolve(options.config) : undefined;
const persistTo = options["persist-to"] ? resolve(options["persist-to"]) : undefined;
let shards;
try {
  ({ shards } = readShards({ config, env: options.env }));
} catch (error) {
  fail(error.message);
}
const where = options.remote ? "remote (Cloudflare)" : `local, ${shown(persistTo ?? resolve(ROOT, ".wrangler", "state"))}`;
let lineOpen = false;
say(`migrating ${shards.length} shard${shards.length === 1 ? "" : "s"} (${where}), in shard order:`);
try {
  await migrateShards({
    config,
    env: options.env,
    remote: options.remote,
    persistTo,
    onShard: (shard) => {
      process.stdout.write(`  ${describeShard(shard)}: `);
      lineOpen = true;
    },
    onMigrated: (_shard, applied) => {
      say(applied.length === 0 ? "up to date" : `applied ${applied.length} (${applied[0]} … ${applied.at(-1)})`);
      lineOpen = false;
    },
  });
} catch (error) {
  if (lineOpen) say("failed");
  fail(`${error.message}${options.remote ? "\nDo not run `wrangler deploy` until every shard is migrated." : ""}`);
}
say(`every shard is migrated (${shards.map((s) => s.databaseName).join(", ")}).`);

function shown(path) {
  const inside = relative(ROOT, path);
  return inside && !inside.startsWith("..") && !isAbsolute(inside) ? inside : path;
}
