/**
 * `GET /v1/operator/storage`: the database's storage figures (SPEC section 12, "Size") — its size
 * (D1's `meta.size_after`), its limit, the executions it retains and the bytes per execution.
 *
 * The figures describe the whole database, every workspace in it, so they are served to an
 * operator token only: a token listed in the `OPERATOR_TOKENS` var (comma-separated; a secret in
 * production). A workspace token (`API_TOKENS`) answers 403 `operator-token-required`; no token or
 * an unknown one answers 401. An operator token grants no workspace: the workspace routes check
 * `API_TOKENS` only (../auth.ts), so it answers 401 there. Keep the two lists disjoint.
 *
 * Mounted in src/app.ts as a route group of its own: the workspace middleware is applied per group
 * (`requireWorkspace`), never to `/v1/*` as a whole, so it never sees this path.
 */
import { Hono } from "hono";
import { createMiddleware } from "hono/factory";
import { storageHighLine } from "../../history/storage-task";
import { InvocationShards } from "../../shards/invocation";
import { readStorage, recountDue, recountExecutions } from "../../ledger";
import { commonProblems } from "../../lib/common-problems";
import { equalDigests, sha256 } from "../../lib/crypto";
import { log } from "../../lib/log";
import { ProblemError, type ProblemCatalog } from "../../lib/problem";
import { workspaceForToken, type AppEnv } from "../auth";
import { nowOf } from "../../lib/clock";

export type OperatorProblemCode = "operator-token-required";

export const operatorProblems = {
  operatorTokenRequired: () =>
    new ProblemError({
      status: 403,
      code: "operator-token-required",
      title: "This route needs an operator token",
      detail:
        "The storage figures describe every workspace of the database, not only yours, so they are served to an operator token " +
        "(`OPERATOR_TOKENS`) only; a workspace token (`API_TOKENS`) cannot read them.",
    }),
} satisfies ProblemCatalog<OperatorProblemCode>;

/** Said with the figures wherever they are shown (docs/logging.md, README). */
export const STORAGE_NOTE =
  "sizeBytes is the whole database, every workspace in it: the pages in use (D1's meta.size_after), indexes included. " +
  "Production D1 reclaims the space of deleted rows. Locally (npm start, wrangler dev) the SQLite file under .wrangler/state " +
  "never shrinks: deleted rows leave free pages that the file keeps, so the file on disk only grows, even when sizeBytes falls.";

/** The configured operator tokens: comma-separated, blanks ignored. */
export function parseOperatorTokens(spec: string | undefined): string[] {
  if (!spec) return [];
  return spec
    .split(",")
    .map((token) => token.trim())
    .filter((token) => token.length > 0);
}

/** The digests of the configured tokens, computed once per isolate for a given `OPERATOR_TOKENS` value. */
let digested: { spec: string | undefined; digests: Promise<Uint8Array[]> } | undefined;

function operatorDigests(spec: string | undefined): Promise<Uint8Array[]> {
  if (!digested || digested.spec !== spec) digested = { spec, digests: Promise.all(parseOperatorTokens(spec).map((t) => sha256(t))) };
  return digested.digests;
}

/** Whether `token` is an operator token: its digest against every configured one, in constant time, no early exit. */
export async function isOperatorToken(spec: string | undefined, token: string): Promise<boolean> {
  const [digests, presented] = await Promise.all([operatorDigests(spec), sha256(token)]);
  let found = false;
  for (const digest of digests) {
    if (equalDigests(digest, presented)) found = true;
  }
  return found;
}

/** An operator token passes; a workspace token is 403 (it is known, and not enough); anything else 401. */
export const requireOperator = createMiddleware<AppEnv>(async function requireOperator(c, next) {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw commonProblems.unauthorized();
  // Both lists are checked every time, so the timing does not tell which one holds the token.
  const [operator, workspace] = await Promise.all([
    isOperatorToken(c.env.OPERATOR_TOKENS, match[1]),
    workspaceForToken(c.env.API_TOKENS, match[1]),
  ]);
  if (operator) return next();
  if (workspace) throw operatorProblems.operatorTokenRequired();
  throw commonProblems.unauthorized();
});

export const operatorRoutes = new Hono<AppEnv>();

operatorRoutes.use("*", requireOperator);

/**
 * Every shard's figures (`shards`, in shard order), and shard 0's at the top level as before shards
 * existed. Each shard is its own database with its own 10 GB: the figures are never summed.
 */
operatorRoutes.get("/storage", async (c) => {
  const shards = new InvocationShards(c.env);
  const figures = await Promise.all(
    shards.config.bindings.map(async (binding, shard) => {
      const db = shards.env(shard).DB;
      const read = await readStorage(db);
      // An hour-old count is taken again here as by the storage task (one more statement, at most hourly).
      const now = nowOf(c.env);
      return { shard, binding, ...(recountDue(read, now) ? await recountExecutions(db, now) : read) };
    }),
  );
  for (const each of figures) log.line(storageHighLine(each, "operator", each.shard));
  const { shard: _shard, binding: _binding, ...first } = figures[0]!;
  return c.json({ ...first, shards: figures, note: STORAGE_NOTE });
});
