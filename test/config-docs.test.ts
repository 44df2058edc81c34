/**
 * docs/configuration.md cannot drift from the configuration: every var, secret and binding of
 * wrangler.toml and demo/wrangler.toml, and every name the code of src/ and demo/src/ reads from its
 * env, has a row there; every row names something that exists.
 */
import { describe, expect, it } from "vitest";
import configurationDoc from "../docs/configuration.md?raw";
import wranglerToml from "../wrangler.toml?raw";
import demoWranglerToml from "../demo/wrangler.toml?raw";

const engineSources = import.meta.glob<string>(["../src/**/*.ts", "!../src/worker-configuration.d.ts"], {
  query: "?raw",
  import: "default",
  eager: true,
});
const demoSources = import.meta.glob<string>("../demo/src/**/*.ts", { query: "?raw", import: "default", eager: true });

/** The names a wrangler.toml configures: `[vars]` keys, `[secrets] required`, every `binding = "…"`. */
function configuredNames(toml: string): Map<string, string> {
  const names = new Map<string, string>();
  let section = "";
  for (const raw of toml.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, "").trim();
    const header = /^\[\[?\s*([A-Za-z0-9_.]+)\s*\]\]?$/.exec(line);
    if (header) {
      section = header[1]!;
      continue;
    }
    const pair = /^([A-Za-z0-9_]+)\s*=\s*(.*)$/.exec(line);
    if (!pair) continue;
    const [, key, value] = pair as unknown as [string, string, string];
    if (section === "vars") names.set(key, "[vars]");
    else if (section === "secrets" && key === "required") {
      for (const m of value.matchAll(/"([^"]+)"/g)) names.set(m[1]!, "[secrets] required");
    } else if (key === "binding") names.set(JSON.parse(value) as string, `[[${section}]]`);
  }
  return names;
}

/**
 * The env names a module reads: `env.NAME` / `vars.NAME`, a cast's `(… as { NAME?: string }).NAME`,
 * a type member `NAME?: string` (the typed views of the env: ChainVars, HistoryVars, …), and
 * `Pick<Env, "NAME" | …>`. Env names are SCREAMING_CASE, so constants read off a module are not mistaken
 * for them unless they follow `env.`, `vars.` or a closing parenthesis.
 */
export function envReads(source: string): Set<string> {
  const found = new Set<string>();
  const patterns = [
    /\b(?:env|vars|bindings)\??\.([A-Z][A-Z0-9_]*)\b/g,
    /\)\??\.([A-Z][A-Z0-9_]*)\b/g,
    /\b([A-Z][A-Z0-9_]*)\??:\s*(?:string|unknown|R2Bucket|D1Database|Queue)\b/g,
  ];
  for (const pattern of patterns) for (const m of source.matchAll(pattern)) found.add(m[1]!);
  for (const pick of source.matchAll(/Pick<(?:Env|Cloudflare\.Env),\s*([^>]*)>/g)) {
    for (const m of pick[1]!.matchAll(/"([A-Z][A-Z0-9_]*)"/g)) found.add(m[1]!);
  }
  // Not env names: a JavaScript constant reached through a parenthesised expression.
  found.delete("MAX_SAFE_INTEGER");
  return found;
}

/** The names docs/configuration.md has a table row for: `| \`NAME\` | …`. */
function documentedNames(doc: string): Set<string> {
  return new Set([...doc.matchAll(/^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/gm)].map((m) => m[1]!));
}

function codeReads(sources: Record<string, string>): Map<string, string> {
  const reads = new Map<string, string>();
  for (const [path, text] of Object.entries(sources)) {
    for (const name of envReads(text)) if (!reads.has(name)) reads.set(name, path.replace(/^\.\.\//, ""));
  }
  return reads;
}

describe("docs/configuration.md", () => {
  const documented = documentedNames(configurationDoc);
  const configured = new Map([...configuredNames(demoWranglerToml), ...configuredNames(wranglerToml)]);
  const read = new Map([...codeReads(demoSources), ...codeReads(engineSources)]);

  it("finds the configuration it checks (the parsers still match the files)", () => {
    expect(configured.get("OUTBOUND_ALLOWLIST")).toBe("[vars]");
    expect(configured.get("API_TOKENS")).toBe("[secrets] required");
    expect(configured.get("DB_1")).toBe("[[d1_databases]]");
    expect(configured.get("ENGINE_URL")).toBe("[vars]");
    expect(read.has("CHAIN_LEASE_MS") && read.has("SECRETS_MASTER_KEY_PREVIOUS") && read.has("ARCHIVE")).toBe(true);
    expect(documented.size).toBeGreaterThan(30);
  });

  it("has a row for every var, secret and binding of wrangler.toml and demo/wrangler.toml", () => {
    const missing = [...configured].filter(([name]) => !documented.has(name)).map(([name, where]) => `${name} (${where})`);
    expect(missing, "add a row for each to docs/configuration.md: default, range, what breaks when it is wrong").toEqual([]);
  });

  it("has a row for every name the code reads from its env", () => {
    const missing = [...read].filter(([name]) => !documented.has(name)).map(([name, where]) => `${name} (read in ${where})`);
    expect(missing, "add a row for each to docs/configuration.md: default, range, what breaks when it is wrong").toEqual([]);
  });

  it("names nothing that is neither configured nor read", () => {
    const stale = [...documented].filter((name) => !configured.has(name) && !read.has(name));
    expect(stale, "remove these rows from docs/configuration.md (or the code stopped reading them by a pattern this test knows)").toEqual(
      [],
    );
  });

  it("recognises the ways the code reads its env", () => {
    const source = [
      "const a = env.API_TOKENS;",
      "const b = (c.env as { OUTBOUND_ALLOWLIST?: string }).OUTBOUND_ALLOWLIST;",
      "interface V { CHAIN_STEPS?: string }",
      'type S = Pick<Env, "D1_SHARDS" | "WORKSPACE_SHARDS">;',
      "const c = Number.MAX_SAFE_INTEGER; const d = problems.PROBLEM_CODES;",
    ].join("\n");
    expect([...envReads(source)].sort()).toEqual(["API_TOKENS", "CHAIN_STEPS", "D1_SHARDS", "OUTBOUND_ALLOWLIST", "WORKSPACE_SHARDS"]);
  });
});
