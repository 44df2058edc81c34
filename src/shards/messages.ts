/**
 * The shard a queue message names. Every message the engine sends carries `shard` (./shard-env.ts
 * stamps it); a message without one was sent by a version before shards and means shard 0.
 */

/** The message's shard; `null` when `shard` is present and not a shard number (malformed). */
export function messageShard(body: unknown): number | null {
  if (body === null || typeof body !== "object" || Array.isArray(body) || !Object.hasOwn(body, "shard")) return 0;
  const shard = (body as { shard: unknown }).shard;
  return typeof shard === "number" && Number.isSafeInteger(shard) && shard >= 0 ? shard : null;
}

/** Messages by the shard they name, in order of first appearance; malformed shards under `null`. */
export function byShard<M extends { body: unknown }>(messages: ReadonlyArray<M>): Map<number | null, M[]> {
  const groups = new Map<number | null, M[]>();
  for (const m of messages) {
    const shard = messageShard(m.body);
    const group = groups.get(shard);
    if (group) group.push(m);
    else groups.set(shard, [m]);
  }
  return groups;
}
