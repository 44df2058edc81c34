import { existsSync } from "node:fs";
import { appendFile, readFile, writeFile } from "node:fs/promises";

/**
 * The local tokens: what `npm start` writes to .dev.vars, the e2e passes with --var and the benches
 * write to their env files. They are never in wrangler.toml, where `wrangler deploy` would serve them:
 * API_TOKENS and OPERATOR_TOKENS are `[secrets] required`, set with `wrangler secret put` in production
 * (README "Deploy"), and an engine without API_TOKENS answers every /v1 route 503 (src/http/auth.ts).
 */
export const LOCAL_TOKENS = Object.freeze({
  /** token:workspace pairs: `dev` on shard 0 and `other` on shard 1 (WORKSPACE_SHARDS). */
  API_TOKENS: "dev-token:dev,other-token:other",
  /** GET /v1/operator/storage. */
  OPERATOR_TOKENS: "operator-token",
});

/** The local tokens as env-file lines (`NAME=value\n`), for a bench's --env-file (it replaces .dev.vars). */
export const localTokenLines = () =>
  Object.entries(LOCAL_TOKENS)
    .map(([name, value]) => `${name}=${value}\n`)
    .join("");

/**
 * A .dev.vars-style text's `NAME=value` pairs (comments and blank lines skipped; one level of quotes removed),
 * as wrangler reads them.
 */
export function parseEnvText(text) {
  const vars = {};
  for (const line of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match) continue;
    const raw = match[2];
    vars[match[1]] = /^(["']).*\1$/.test(raw) ? raw.slice(1, -1) : raw;
  }
  return vars;
}

/**
 * `npm start`'s .dev.vars: written whole (`content`, then every line of `required`) when missing; an
 * existing file — the user's, maybe older than a required name — is never rewritten: each required name
 * it lacks is appended (`required`: name → a function giving its lines). Returns what it did and the
 * file's variables afterwards.
 */
export async function ensureDevVars(file, { content = "", required }) {
  if (!existsSync(file)) {
    await writeFile(
      file,
      content +
        Object.values(required)
          .map((lines) => lines())
          .join(""),
    );
    return { created: true, added: [], vars: parseEnvText(await readFile(file, "utf8")) };
  }
  const text = await readFile(file, "utf8");
  const present = parseEnvText(text);
  const added = Object.keys(required).filter((name) => !Object.hasOwn(present, name));
  if (added.length > 0) {
    const lines = added.map((name) => required[name]()).join("");
    await appendFile(file, `${text.endsWith("\n") || text === "" ? "" : "\n"}${lines}`);
  }
  return { created: false, added, vars: parseEnvText(await readFile(file, "utf8")) };
}
