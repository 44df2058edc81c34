/**
 * The problems of shards (SPEC section 13, docs/shards.md): the deployment's to fix, never the
 * client's. Each is a 503 that writes nothing; the request may be retried once the operator fixed it.
 */
import { ProblemError, type ProblemCatalog } from "../lib/problem";

export type ShardProblemCode = "shards-misconfigured" | "shard-schema-behind" | "workspace-misplaced";

const RETRY_AFTER = { "retry-after": "30" };

export const shardProblems = {
  /** `D1_SHARDS` or `WORKSPACE_SHARDS` cannot be right (`detail` says which entry). */
  misconfigured: (detail: string) =>
    new ProblemError({
      status: 503,
      code: "shards-misconfigured",
      title: "The deployment's shard configuration is invalid",
      detail: `${detail} Operator: fix the var in wrangler.toml and deploy (docs/shards.md).`,
      headers: RETRY_AFTER,
    }),
  /** A message or placement names a shard this deployment does not bind (yet: a rollout in progress). */
  unknownShard: (shard: number, count: number) =>
    new ProblemError({
      status: 503,
      code: "shards-misconfigured",
      title: "The deployment's shard configuration is invalid",
      detail:
        `Shard ${shard} is not bound: D1_SHARDS lists ${count} shard(s). Operator: bind every shard and list it in D1_SHARDS ` +
        `(append-only) before placing workspaces on it (docs/shards.md "Add a shard").`,
      headers: RETRY_AFTER,
    }),
  /** The shard's applied migrations lag the engine's: new code never runs on an old schema. */
  schemaBehind: (shard: number, applied: string | null, expected: string) =>
    new ProblemError({
      status: 503,
      code: "shard-schema-behind",
      title: "A database has not been migrated for this version",
      detail:
        `Shard ${shard}'s latest applied migration is ${applied ?? "none"}; this version of idemflow needs ${expected}. ` +
        `Operator: apply the migrations to every shard (README "Deploy"), then retry.`,
      extensions: { shard, applied, expected },
      headers: RETRY_AFTER,
    }),
  /** The placement fence: the map moved a workspace its data did not follow. */
  workspaceMisplaced: (workspace: string, configured: number, recorded: number) =>
    new ProblemError({
      status: 503,
      code: "workspace-misplaced",
      title: "This workspace's data is on another shard",
      detail:
        `WORKSPACE_SHARDS places workspace "${workspace}" on shard ${configured}, but its data is recorded on shard ${recorded}. ` +
        `Serving it from shard ${configured} would split its deduplication across two databases, so nothing is served ` +
        `until the operator restores the map or records a completed move (docs/shards.md "Move a workspace").`,
      extensions: { workspace, configured, recorded },
      headers: RETRY_AFTER,
    }),
} satisfies ProblemCatalog<ShardProblemCode>;
