/**
 * The key memory's filter (docs/history.md "Key memory: hot and cold"): which keys MAY have a
 * cold record. A blocked Bloom filter in D1 (migrations/0030 `key_filter`): a key hashes to one
 * 512-bit block and sets 7 bits in it, so a probe reads one row per generation — one indexed query,
 * whatever the number of keys — and a key the filter has never seen costs no R2 read unless its
 * 7 bits happen to be set by others (the false-positive rate, stated at a full generation in the
 * docs). It never answers "absent" for a key it holds: bits are only ever set.
 *
 * - The hash: SHA-256 of the workspace and the key (`keyDigest`), also the cold object's name —
 *   the key itself never leaves the hot row.
 * - A generation holds `KEYS_PER_GENERATION` keys (about 10.7 bits a key over 2^20 blocks), then
 *   the next begins: the rate stays bounded as the tier grows, and a probe reads one more row per
 *   generation (about 6 a year at 10 keys a second).
 * - Words are signed 64-bit SQLite integers, passed as decimal text (a JS number holds 53 bits):
 *   the move ORs them in SQL (`w0 = w0 | excluded.w0`), the probe tests them in SQL.
 */

export const FILTER_BLOCKS = 1 << 20;
export const BITS_PER_BLOCK = 512;
export const BITS_PER_KEY = 7;
export const KEYS_PER_GENERATION = 50_000_000;
const WORDS = 8;

/** A key's place in the filter and in the cold tier. */
export interface KeyDigest {
  /** Hex SHA-256 of workspace NUL key: the cold object's name (src/keys/cold.ts). */
  hash: string;
  block: number;
  /** The 512-bit mask of its 7 bits, as eight signed 64-bit words in decimal text. */
  mask: string[];
}

const encoder = new TextEncoder();

/** The digest of `key` in `workspace`. */
export async function keyDigest(workspace: string, key: string): Promise<KeyDigest> {
  const bytes = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(`${workspace}\u0000${key}`)));
  const hash = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  const byte = (i: number) => bytes[i] ?? 0;
  const block = ((byte(0) << 16) | (byte(1) << 8) | byte(2)) & (FILTER_BLOCKS - 1);
  const words: bigint[] = new Array<bigint>(WORDS).fill(0n);
  for (let i = 0; i < BITS_PER_KEY; i += 1) {
    const bit = ((byte(4 + 2 * i) << 8) | byte(5 + 2 * i)) % BITS_PER_BLOCK;
    words[bit >> 6] = (words[bit >> 6] ?? 0n) | (1n << BigInt(bit & 63));
  }
  return { hash, block, mask: words.map((w) => BigInt.asIntN(64, w).toString()) };
}

const WORD_COLUMNS = Array.from({ length: WORDS }, (_, i) => `w${i}`);

/** The words of `masks` OR-ed per block: one row per block a pass touches. */
export function mergeMasks(digests: readonly KeyDigest[]): Array<[number, ...string[]]> {
  const byBlock = new Map<number, bigint[]>();
  for (const d of digests) {
    const words = byBlock.get(d.block) ?? new Array<bigint>(WORDS).fill(0n);
    d.mask.forEach((w, i) => (words[i] = (words[i] ?? 0n) | BigInt(w)));
    byBlock.set(d.block, words);
  }
  return [...byBlock].map(([block, words]) => [block, ...words.map((w) => BigInt.asIntN(64, w).toString())]);
}

/** Every set bit of the JSON row `j` (`[block, w0…w7]`) is set in the filter row `f`. */
const holds = (j: string) =>
  WORD_COLUMNS.map((w, i) => `(f.${w} & CAST(${j} ->> ${i + 1} AS INTEGER)) = CAST(${j} ->> ${i + 1} AS INTEGER)`).join(" AND ");

/**
 * `maybeColdSql`: of the digests bound as ?1 (a JSON array of `[block, w0…w7]`), the positions
 * whose bits are all set in some generation — ONE statement, one index range per digest.
 */
export const MAYBE_COLD_SQL = `SELECT CAST(j.key AS INTEGER) AS i FROM json_each(?1) j
  WHERE EXISTS (SELECT 1 FROM key_filter f WHERE f.block = j.value ->> 0 AND ${holds("j.value")})`;

/** The positions in `digests` the filter may hold (one query). */
export async function maybeCold(db: D1Database, digests: readonly KeyDigest[]): Promise<Set<number>> {
  if (digests.length === 0) return new Set();
  const { results } = await db
    .prepare(MAYBE_COLD_SQL)
    .bind(JSON.stringify(digests.map((d) => [d.block, ...d.mask])))
    .all<{ i: number }>();
  return new Set((results ?? []).map((r) => r.i));
}

/** The generation new keys go to, and the keys it holds: `SELECT` for the move's first query. */
export const CURRENT_GENERATION_SQL = "SELECT gen, keys FROM key_filter_gens ORDER BY gen DESC LIMIT 1";

/**
 * The generation the next `adding` keys go to, given the latest one (null: none yet): the latest
 * while they fit in its `capacity` (`KEYS_PER_GENERATION`; a test passes a small one), else a new
 * one: a pass that would overfill a generation opens the next, so none holds more than its capacity
 * (but a first pass larger than it). Nothing else
 * changes when a generation opens: the probe reads every generation's block of the key
 * (`MAYBE_COLD_SQL`: one index range, one row per generation).
 */
export function generationFor(latest: { gen: number; keys: number } | null, adding: number, capacity = KEYS_PER_GENERATION): number {
  if (latest === null) return 0;
  return latest.keys + adding > capacity && latest.keys > 0 ? latest.gen + 1 : latest.gen;
}

/**
 * The statements that add `digests` to generation `gen`: the blocks' bits OR-ed in (one upsert
 * over a JSON array) and the generation's count. For the move's batch, with the hot rows' delete:
 * a key leaves the hot tier in the same transaction it enters the filter.
 */
export function addToFilter(db: D1Database, digests: readonly KeyDigest[], gen: number): [D1PreparedStatement, D1PreparedStatement] {
  const rows = mergeMasks(digests);
  const values = WORD_COLUMNS.map((_, i) => `CAST(j.value ->> ${i + 1} AS INTEGER)`).join(", ");
  const update = WORD_COLUMNS.map((w) => `${w} = ${w} | excluded.${w}`).join(", ");
  return [
    db
      .prepare(
        `INSERT INTO key_filter (block, gen, ${WORD_COLUMNS.join(", ")})
         SELECT j.value ->> 0, ?2, ${values} FROM json_each(?1) j WHERE true
         ON CONFLICT (block, gen) DO UPDATE SET ${update}`,
      )
      .bind(JSON.stringify(rows), gen),
    db
      .prepare("INSERT INTO key_filter_gens (gen, keys) VALUES (?1, ?2) ON CONFLICT (gen) DO UPDATE SET keys = keys + excluded.keys")
      .bind(gen, digests.length),
  ];
}
