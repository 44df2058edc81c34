/**
 * The shard configuration (SPEC section 13): the vars and the bindings of wrangler.toml agree, every
 * shard is its own database, the placement map parses strictly, and the engine's idea of its own
 * latest migration is the last file of migrations/.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import wranglerToml from "../../wrangler.toml?raw";
import { MAX_SHARDS, parsePlacement, parseShardList, shardConfig, shardOf } from "../../src/shards/config";
import { LATEST_MIGRATION } from "../../src/shards/schema";
import { ProblemError } from "../../src/lib/problem";

/** Each `[[d1_databases]]` block of wrangler.toml: its binding and database id. */
function d1Blocks(toml: string): Array<{ binding: string; databaseId: string; migrationsDir: string }> {
  return toml
    .split(/^\[\[d1_databases\]\]\s*$/m)
    .slice(1)
    .map((block) => block.split(/^\[/m)[0]!)
    .map((block) => ({
      binding: /^binding\s*=\s*"([^"]+)"/m.exec(block)?.[1] ?? "",
      databaseId: /^database_id\s*=\s*"([^"]+)"/m.exec(block)?.[1] ?? "",
      migrationsDir: /^migrations_dir\s*=\s*"([^"]+)"/m.exec(block)?.[1] ?? "",
    }));
}

/** The value of a `[vars]` entry. */
function wranglerVar(toml: string, name: string): string | undefined {
  return new RegExp(`^${name}\\s*=\\s*"([^"]*)"`, "m").exec(toml)?.[1];
}

function problemCode(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof ProblemError ? error.code : `not a problem: ${String(error)}`;
  }
  return undefined;
}

describe("wrangler.toml's shards", () => {
  it("lists in D1_SHARDS exactly its D1 bindings, in order, DB first", () => {
    const blocks = d1Blocks(wranglerToml);
    expect(parseShardList(wranglerVar(wranglerToml, "D1_SHARDS")!)).toEqual(blocks.map((b) => b.binding));
    expect(blocks[0]!.binding).toBe("DB");
    expect(blocks.length).toBeGreaterThanOrEqual(2);
  });

  it("gives every shard its own database id (locally one id is one SQLite file) and the same migrations", () => {
    const blocks = d1Blocks(wranglerToml);
    expect(new Set(blocks.map((b) => b.databaseId)).size).toBe(blocks.length);
    expect(new Set(blocks.map((b) => b.migrationsDir))).toEqual(new Set(["migrations"]));
  });

  it("places every WORKSPACE_SHARDS entry on a listed shard (dev on 0, other on 1 locally)", () => {
    const shards = parseShardList(wranglerVar(wranglerToml, "D1_SHARDS")!);
    const { placed, defaultShard } = parsePlacement(wranglerVar(wranglerToml, "WORKSPACE_SHARDS")!, shards.length);
    expect([...placed]).toEqual([
      ["dev", 0],
      ["other", 1],
    ]);
    expect(defaultShard).toBe(0);
  });

  it("the shards are two databases: a row written through one is not in the other", async () => {
    const db0 = env.TEST_SHARD_0 ?? env.DB;
    await db0.prepare("CREATE TABLE IF NOT EXISTS shard_probe (n INTEGER)").run();
    await db0.prepare("INSERT INTO shard_probe (n) VALUES (1)").run();
    const inOne = await env.DB_1.prepare("SELECT name FROM sqlite_master WHERE name = 'shard_probe'").first();
    expect(inOne).toBeNull();
  });
});

describe("the engine's latest migration", () => {
  it("is the last file of migrations/ (the shard schema check compares against it)", () => {
    const names = env.TEST_MIGRATIONS.map((m) => m.name).sort();
    expect(`${names.at(-1)}`).toBe(LATEST_MIGRATION);
  });
});

describe("parsing", () => {
  it("D1_SHARDS: DB first, no blanks, no repeats", () => {
    expect(parseShardList("DB")).toEqual(["DB"]);
    expect(parseShardList(" DB , DB_1 ,DB_2")).toEqual(["DB", "DB_1", "DB_2"]);
    expect(problemCode(() => parseShardList("DB_1,DB"))).toBe("shards-misconfigured");
    expect(problemCode(() => parseShardList("DB,,DB_1"))).toBe("shards-misconfigured");
    expect(problemCode(() => parseShardList("DB,DB_1,DB_1"))).toBe("shards-misconfigured");
    // One cron tick serves at most MAX_SHARDS shards within its 1,000 queries (src/shards/cron.ts).
    const list = (n: number) => ["DB", ...Array.from({ length: n - 1 }, (_, i) => `DB_${i + 1}`)].join(",");
    expect(parseShardList(list(MAX_SHARDS))).toHaveLength(MAX_SHARDS);
    expect(problemCode(() => parseShardList(list(MAX_SHARDS + 1)))).toBe("shards-misconfigured");
  });

  it("WORKSPACE_SHARDS: pairs, a `*` default, every shard in range, no workspace twice", () => {
    expect(parsePlacement("", 2)).toEqual({ placed: new Map(), defaultShard: 0 });
    const { placed, defaultShard } = parsePlacement("a:1, *:1 ,b:0,team:eu:1", 2);
    expect([...placed]).toEqual([
      ["a", 1],
      ["b", 0],
      ["team:eu", 1],
    ]);
    expect(defaultShard).toBe(1);
    for (const bad of ["a", "a:", ":1", " :1", "a:x", "a:-1", "a:2", "*:2", "a:1,a:0", "a:1.5", "a:1,a :0"]) {
      expect(
        problemCode(() => parsePlacement(bad, 2)),
        bad,
      ).toBe("shards-misconfigured");
    }
  });

  it("WORKSPACE_SHARDS: spaces around a name or a shard are layout, not part of the name", () => {
    // "acme-eu :1" once placed "acme-eu " — and the real acme-eu landed on the default shard.
    const { placed } = parsePlacement("acme-eu :1, acme-us: 1 ,\tacme-ap\t:\t1", 2);
    expect([...placed]).toEqual([
      ["acme-eu", 1],
      ["acme-us", 1],
      ["acme-ap", 1],
    ]);
    const config = { bindings: ["DB", "DB_1"], placed, defaultShard: 0, key: "" };
    expect(shardOf(config, "acme-eu")).toBe(1);
    expect(parsePlacement(" * : 1", 2).defaultShard).toBe(1);
  });

  it("user-named workspaces are map keys, never object members", () => {
    const { placed } = parsePlacement("__proto__:1,constructor:1", 2);
    const config = { bindings: ["DB", "DB_1"], placed, defaultShard: 0, key: "" };
    expect(shardOf(config, "__proto__")).toBe(1);
    expect(shardOf(config, "constructor")).toBe(1);
    expect(shardOf(config, "toString")).toBe(0);
  });

  it("a D1_SHARDS naming a binding the Worker lacks is a 503 shards-misconfigured, not a crash", () => {
    const broken = { ...env, D1_SHARDS: "DB,DB_9", WORKSPACE_SHARDS: "" } as unknown as Env;
    expect(problemCode(() => shardConfig(broken))).toBe("shards-misconfigured");
  });
});
