/**
 * Bearer token → workspace. The workspace is the server-derived principal: every `/v1` query is
 * scoped by it, and no request field can override it.
 *
 * Tokens come from the `API_TOKENS` secret (`token:workspace` pairs, comma-separated): never a
 * wrangler.toml var, so a deploy never serves a token written there. Locally `npm start` writes
 * `dev-token:dev,other-token:other` to .dev.vars; production sets it with `wrangler secret put`
 * (`[secrets] required` makes `wrangler deploy` fail until it is set). A Worker running without it
 * answers every `/v1` route 503 `tokens-not-configured` and logs `config.tokens_missing`.
 *
 * The workspace also chooses the database: the middleware replaces the request's env with its
 * shard's (src/shards/placement.ts), once, so every route below works on that shard only.
 */
import { createMiddleware } from "hono/factory";
import { commonProblems } from "../lib/common-problems";
import { equalDigests, sha256 } from "../lib/crypto";
import { log } from "../lib/log";
import { placeWorkspace } from "../shards/placement";
import { httpProblems } from "./problems";

export type AppEnv = { Bindings: Env; Variables: { workspace: string } };

export function parseTokens(spec: string | undefined): Array<{ token: string; workspace: string }> {
  if (!spec) return [];
  return spec
    .split(",")
    .map((pair) => pair.trim())
    .filter((pair) => pair.length > 0)
    .map((pair) => {
      const at = pair.lastIndexOf(":");
      return { token: pair.slice(0, at), workspace: pair.slice(at + 1) };
    })
    .filter((entry) => entry.token.length > 0 && entry.workspace.length > 0);
}

type TokenDigest = { digest: Uint8Array; workspace: string };
/** The digests of the configured tokens, computed once per isolate for a given `API_TOKENS` value. */
let digested: { spec: string | undefined; entries: Promise<TokenDigest[]> } | undefined;

function tokenDigests(spec: string | undefined): Promise<TokenDigest[]> {
  if (!digested || digested.spec !== spec) {
    const entries = Promise.all(parseTokens(spec).map(async (e) => ({ digest: await sha256(e.token), workspace: e.workspace })));
    digested = { spec, entries };
  }
  return digested.entries;
}

export async function workspaceForToken(spec: string | undefined, token: string): Promise<string | undefined> {
  const [entries, presented] = await Promise.all([tokenDigests(spec), sha256(token)]);
  let found: string | undefined;
  // Compare the presented token's digest against every entry's, in constant time and without an
  // early exit, so the response time reveals neither a prefix nor which entry matched.
  for (const entry of entries) {
    if (equalDigests(entry.digest, presented)) found = entry.workspace;
  }
  return found;
}

/** The `API_TOKENS` values already reported missing in this isolate: one log line each, not one per request. */
const reportedMissing = new Set<string>();

/** The last `API_TOKENS` value found to hold a token (the check runs on every /v1 request: parsed once per value). */
let configuredSpec: string | undefined;

/**
 * `/v1/*`, before every route (the public document excepted): without a configured token the
 * deployment serves no `/v1` route — not even to a caller presenting a token — and says why.
 */
export const requireConfiguredTokens = createMiddleware<AppEnv>(async function requireConfiguredTokens(c, next) {
  const spec = c.env.API_TOKENS;
  if (spec === undefined || spec !== configuredSpec) {
    if (parseTokens(spec).length > 0) configuredSpec = spec;
    else throw tokensMissing(spec);
  }
  await next();
});

/** The 503, logged once per value per isolate. */
function tokensMissing(spec: string | undefined): Error {
  const value = spec ?? "";
  if (!reportedMissing.has(value)) {
    reportedMissing.add(value);
    log.error("config.tokens_missing", {
      variable: "API_TOKENS",
      set: spec !== undefined,
      message: "API_TOKENS is unset or holds no token:workspace pair: every /v1 route answers 503. Run `wrangler secret put API_TOKENS`.",
    });
  }
  return httpProblems.tokensNotConfigured();
}

export const requireWorkspace = createMiddleware<AppEnv>(async function requireWorkspace(c, next) {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw commonProblems.unauthorized();
  const workspace = await workspaceForToken(c.env.API_TOKENS, match[1]);
  if (!workspace) throw commonProblems.unauthorized();
  c.set("workspace", workspace);
  c.env = await placeWorkspace(c.env, workspace);
  await next();
});
