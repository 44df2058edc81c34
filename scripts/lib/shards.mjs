/**
 * The shards of a wrangler.toml, as the scripts see them (SPEC section 13, docs/shards.md): the D1
 * bindings listed in order by the var `D1_SHARDS` (shard 0 is `DB`), each mapped to its
 * `[[d1_databases]]` block, and the workspace placement of `WORKSPACE_SHARDS`. `npm run migrate:local`,
 * `npm run migrate:remote`, `npm start` and `npm run e2e` migrate every shard through `migrateShards`.
 *
 * The parser reads only what it needs: top-level tables and arrays of tables, and `key = "string"`
 * lines (comments and every other value are skipped). With `env`, the `[env.NAME.…]` tables are read
 * instead, as wrangler does for `--env` (neither `d1_databases` nor `vars` is inherited).
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT, applyMigrations } from "./wrangler-dev.mjs";

export const WRANGLER_TOML = resolve(ROOT, "wrangler.toml");

/** The id wrangler.toml ships with until `wrangler d1 create` prints a real one (README "Deploy"). */
const PLACEHOLDER_ID = /^0{8}-0{4}-0{4}-0{4}-0{10}\d\d$/;

/** `[[name]]` / `[name]` sections, each with its `key = "string"` pairs, in file order. */
function sections(text) {
  const found = [{ header: "", array: false, values: {} }];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    const header = /^(\[\[?)\s*([A-Za-z0-9_.\-"]+?)\s*\]\]?\s*(#.*)?$/.exec(line);
    if (header) {
      found.push({ header: header[2].replaceAll('"', ""), array: header[1] === "[[", values: {} });
      continue;
    }
    const pair = /^([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(#.*)?$/.exec(line);
    if (pair) found.at(-1).values[pair[1]] = pair[2] !== undefined ? JSON.parse(`"${pair[2]}"`) : pair[3];
  }
  return found;
}

/**
 * Read the shards of `config` (default: the repo's wrangler.toml). Returns
 * `{ config, env, shards: [{ index, binding, databaseName, databaseId, migrationsDir }], vars, placement }`,
 * or throws an Error that says what in the file is wrong.
 */
export function readShards({ config = WRANGLER_TOML, env } = {}) {
  const text = readFileSync(config, "utf8");
  const prefix = env ? `env.${env}.` : "";
  const all = sections(text);
  const databases = all.filter((s) => s.array && s.header === `${prefix}d1_databases`).map((s) => s.values);
  const vars = Object.assign({}, ...all.filter((s) => !s.array && s.header === `${prefix}vars`).map((s) => s.values));
  const where = `${config}${env ? ` (env ${env})` : ""}`;
  const problem = (message) => new Error(`${where}: ${message}`);

  const bindings = (vars.D1_SHARDS ?? "DB").split(",").map((b) => b.trim());
  if (bindings.some((b) => b.length === 0)) throw problem(`D1_SHARDS "${vars.D1_SHARDS}" has an empty entry`);
  // As the engine (src/shards/config.ts): DB is shard 0, where the data of before shards lives.
  if (bindings[0] !== "DB") throw problem(`D1_SHARDS must start with DB (shard 0); got "${vars.D1_SHARDS}"`);
  // src/shards/config.ts MAX_SHARDS: one cron tick serves at most 7 shards within its 1,000 queries.
  if (bindings.length > 7) throw problem(`D1_SHARDS lists ${bindings.length} shards; the engine binds at most 7 (docs/shards.md)`);
  const configDir = resolve(config, "..");
  const shards = bindings.map((binding, index) => {
    if (bindings.indexOf(binding) !== index) throw problem(`D1_SHARDS lists ${binding} twice`);
    const block = databases.find((d) => d.binding === binding);
    if (!block) throw problem(`D1_SHARDS lists ${binding} (shard ${index}), but no [[d1_databases]] block binds it`);
    if (!block.database_name) throw problem(`the [[d1_databases]] block of ${binding} has no database_name`);
    if (!block.database_id) throw problem(`the [[d1_databases]] block of ${binding} has no database_id`);
    return {
      index,
      binding,
      databaseName: block.database_name,
      databaseId: block.database_id,
      migrationsDir: resolve(configDir, block.migrations_dir ?? "migrations"),
    };
  });
  for (const shard of shards) {
    const same = (key) => shards.find((other) => other !== shard && other[key] === shard[key]);
    if (same("databaseName")) {
      throw problem(`shards ${shard.index} and ${same("databaseName").index} name the same database "${shard.databaseName}"`);
    }
    // Locally wrangler keys a database by its id: two shards with one id would share one SQLite file.
    if (same("databaseId")) throw problem(`shards ${shard.index} and ${same("databaseId").index} have the same database_id`);
    if (shard.migrationsDir !== shards[0].migrationsDir) {
      throw problem(
        `${shard.binding}'s migrations_dir is not shard 0's: every shard applies the engine's migrations (${shards[0].migrationsDir})`,
      );
    }
  }
  return { config, env, shards, vars, placement: parsePlacement(vars.WORKSPACE_SHARDS ?? "", shards.length) };
}

/**
 * `WORKSPACE_SHARDS` ("dev:0,other:1,*:0") as `{ workspaces: Map<workspace, shard>, defaultShard, shardOf(workspace) }`.
 * The same rules as the engine's parser (src/shards/config.ts); the scripts only print and check with it.
 */
export function parsePlacement(value, shardCount) {
  const workspaces = new Map();
  let defaultShard = 0;
  for (const entry of value.split(",").map((e) => e.trim())) {
    if (entry.length === 0) continue;
    const match = /^(.+):(\d+)$/.exec(entry);
    if (!match) throw new Error(`WORKSPACE_SHARDS: "${entry}" is not workspace:shard`);
    const shard = Number(match[2]);
    if (shard >= shardCount) throw new Error(`WORKSPACE_SHARDS: "${entry}" names shard ${shard}; D1_SHARDS has ${shardCount}`);
    if (match[1] === "*") defaultShard = shard;
    else if (workspaces.has(match[1])) throw new Error(`WORKSPACE_SHARDS places "${match[1]}" twice`);
    else workspaces.set(match[1], shard);
  }
  return { workspaces, defaultShard, shardOf: (workspace) => workspaces.get(workspace) ?? defaultShard };
}

/** The `API_TOKENS` var ("token:workspace,…") as `[{ token, workspace }]`: locally dev-token → dev, other-token → other. */
export function tokenWorkspaces(vars) {
  return (vars.API_TOKENS ?? "")
    .split(",")
    .map((pair) => pair.split(":").map((part) => part.trim()))
    .filter(([token, workspace]) => token && workspace)
    .map(([token, workspace]) => ({ token, workspace }));
}

/** "shard 1 (DB_1 → idemflow-shard-1)" */
export const describeShard = (shard) => `shard ${shard.index} (${shard.binding} → ${shard.databaseName})`;

/**
 * Apply the engine's migrations to every shard, in shard order, and stop at the first failure:
 * `wrangler d1 migrations apply <database_name> --local|--remote` per shard (wrangler skips the
 * migrations a database already has, so a rerun after a failure carries on where it stopped).
 * `persistTo` (local only) is the state directory; `onShard(shard)` is called before each shard and
 * `onMigrated(shard, applied)` after it, with the names of the migrations applied (none: it was up to date).
 * Rejects with an Error whose message names the shard that failed and the ones that were, and were not, migrated.
 */
export async function migrateShards({ config, env, remote = false, persistTo, logFile, onShard, onMigrated } = {}) {
  const { shards } = readShards({ config, env });
  if (remote) {
    const placeholder = shards.find((s) => PLACEHOLDER_ID.test(s.databaseId));
    if (placeholder) {
      throw new Error(
        `${describeShard(placeholder)} still has the placeholder database_id ${placeholder.databaseId}: run ` +
          `\`npx wrangler d1 create ${placeholder.databaseName}\` and put the id it prints into wrangler.toml`,
      );
    }
  }
  for (const shard of shards) {
    onShard?.(shard);
    // wrangler lists the migrations it applied as table rows ("│ 0018_….sql │ ✅ │"), redrawn as it goes.
    const applied = new Set();
    const onLine = (line) => {
      const row = /^│\s*(\d{4}_\S+\.sql)\s*│\s*✅/.exec(line);
      if (row) applied.add(row[1]);
    };
    try {
      await applyMigrations({ database: shard.databaseName, config, env, remote, persistTo, logFile, onLine });
      onMigrated?.(shard, [...applied].sort());
    } catch (error) {
      const list = (some) => (some.length === 1 ? `shard ${some[0].index} was` : `shards ${some.map((s) => s.index).join(", ")} were`);
      const [before, after] = [shards.slice(0, shard.index), shards.slice(shard.index)];
      const done = before.length === 0 ? "no shard was migrated" : `${list(before)} migrated, ${list(after)} not`;
      const failure = new Error(
        `migrating ${describeShard(shard)} failed: ${done}. ` +
          `The engine refuses a shard whose schema lags its own (503 shard-schema-behind): fix the cause and run the ` +
          `command again (migrations already applied are skipped).\n${error.message}`,
      );
      failure.shard = shard;
      throw failure;
    }
  }
  return shards;
}
