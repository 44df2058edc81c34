/**
 * The migration check: the engine refuses to use a shard whose applied migrations lag its own, so
 * a deploy that migrated some shards and not others never runs new code on an old schema.
 *
 * Checked once per isolate per shard binding (a passed check is kept; a failed one is asked again
 * after `RECHECK_MS`, so a shard migrated after the deploy is used without a redeploy).
 */
import { shardProblems } from "./problems";

/** The last file of migrations/ (a test keeps them equal): what this version of the engine needs. */
export const LATEST_MIGRATION = "0046_identity_sweep_walk.sql";

const RECHECK_MS = 5_000;

type Check = { ok: true } | { ok: false; until: number; error: unknown };
const checks = new Map<string, Check>();

/** Resolves when shard `shard` (bound as `binding`) has every migration this version needs. */
export async function shardSchemaReady(db: D1Database, binding: string, shard: number, now = Date.now()): Promise<void> {
  const known = checks.get(binding);
  if (known?.ok) return;
  if (known && now < known.until) throw known.error;
  const applied = await latestApplied(db);
  if (applied !== null && applied >= LATEST_MIGRATION) {
    checks.set(binding, { ok: true });
    return;
  }
  const error = shardProblems.schemaBehind(shard, applied, LATEST_MIGRATION);
  checks.set(binding, { ok: false, until: now + RECHECK_MS, error });
  throw error;
}

/** wrangler's (and the test pool's) record of applied migrations; none when the table is missing. */
async function latestApplied(db: D1Database): Promise<string | null> {
  try {
    return await db.prepare("SELECT max(name) AS name FROM d1_migrations").first<string>("name");
  } catch (error) {
    if (/no such table/i.test(String(error))) return null;
    throw error;
  }
}

/** Tests: forget every check (a test that un-migrates a shard must not see an earlier pass). */
export function forgetSchemaChecks(): void {
  checks.clear();
}
