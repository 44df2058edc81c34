/**
 * The history archive (SPEC section 12, docs/history-archive.md): before the history sweep
 * deletes a finished execution's rows, its trace — the JSON `GET /v1/executions/{id}` answers,
 * built by the same `buildTrace` from the same records — is written to the R2 bucket `ARCHIVE`,
 * gzip-compressed, with `"archived": true` added. `GET` of a swept execution answers it from
 * there (src/http/routes/executions.ts), and an erasure deletes it.
 *
 * One object per execution: `executions/{workspace}/{executionId}/{createdAt}.json.gz` (each
 * segment URI-encoded; `createdAt` in ms tells two runs apart should an id ever be given again
 * after its tombstone expired). Writing is idempotent: a sweep that crashed between the write and
 * the delete selects the same executions on its next pass and writes the same keys again.
 *
 * Bounded, in queries and in memory (a cron invocation has 1,000 queries and 128 MB):
 * - one statement estimates every trace's size (`readTraceSizes`); a trace estimated over
 *   `ARCHIVE_LIMITS.maxTraceJsonBytes` is never read: it stays in D1 (logged);
 * - the others are read in parts of at most `partBytes` (estimated), at most `maxParts` parts
 *   per call, each part ONE batch (`readTraceRecordsForSet`); what does not fit waits for the
 *   next pass (the sweep keeps it: it is not in the returned set);
 * - each trace's JSON and its gzip are checked against exact caps before the put;
 * - at most `putConcurrency` traces are encoded and put at once (a Worker has 6 connections).
 * A trace that cannot be archived is never deleted: the sweep removes only the ids returned.
 */
import { erasedMeanwhile, readTraceRecordsForSet, readTraceSizes, TRACE_SET_QUERIES, type RemovableExecution } from "../ledger";
import { archiveSetting } from "./archive-var";
import { BodyTooLargeError, readAtMost } from "../lib/bounded-read";
import { log } from "../lib/log";
import { buildTrace, type Trace } from "../steps/trace";
import type { Archiver } from "./sweep";

/** A trace as the archive holds it and `GET` answers it for a swept execution. */
export type ArchivedTrace = Trace & { archived: true };

/** What names an archive object: the execution, its workspace and when it was created. */
export interface ArchiveRef {
  id: string;
  workspace: string;
  createdAt: number;
}

export interface ArchiveLimits {
  /**
   * The most bytes of JSON one archived trace may take (estimated before reading, then exact).
   * The encoder holds the trace as objects, as a JSON string (UTF-16: twice its bytes) and as
   * UTF-8 bytes at once, with up to `putConcurrency` traces in flight, inside a 128 MB isolate;
   * the read side (`readArchivedTrace`, a request) holds it decompressed once more. 8 MiB keeps
   * the worst case of six traces well under half the isolate. A trace is already bounded per
   * value (64 KiB per step output, 8 KiB per attempt summary), so only an execution with
   * hundreds of large steps comes near it; it stays in D1 and is logged.
   */
  maxTraceJsonBytes: number;
  /**
   * The most bytes of gzip one object may take. JSON compresses five to twenty times, so an
   * object near this is a trace of incompressible text (base64 blobs in outputs): refused like
   * an oversized trace, because reading it back (`GET`) buffers and inflates it whole.
   */
  maxObjectBytes: number;
  /** Estimated trace bytes read in one batch. */
  partBytes: number;
  /** Batches one archive call may send: `ARCHIVE_READ_QUERIES` follows from it. */
  maxParts: number;
  /** R2 puts (and encodings) in flight at once: Workers allow 6 simultaneous connections. */
  putConcurrency: number;
}

const MiB = 1024 * 1024;

export const ARCHIVE_LIMITS: ArchiveLimits = Object.freeze({
  maxTraceJsonBytes: 8 * MiB,
  maxObjectBytes: 4 * MiB,
  partBytes: 4 * MiB,
  maxParts: 4,
  putConcurrency: 6,
});

/**
 * D1 queries one archive call sends at most: the size estimate (one statement), then one batch of
 * `TRACE_SET_QUERIES` statements per part, then the check for executions erased meanwhile (one). A
 * typical pass (a few hundred traces of a few KB) reads in one part: 1 + 8 + 1 = 10 statements; the
 * sweep counts what was actually sent and reserves this.
 */
export const ARCHIVE_READ_QUERIES = 1 + TRACE_SET_QUERIES * ARCHIVE_LIMITS.maxParts + 1;

/** The object's content type: the bytes are a gzip file (`.json.gz`), served decompressed by `GET` only. */
const OBJECT_CONTENT_TYPE = "application/gzip";
/** The format of the JSON inside, in the object's custom metadata. */
const OBJECT_FORMAT = "idemflow-trace/1";

/** The object key of an execution's archived trace. */
export function archiveKey(ref: ArchiveRef): string {
  const segments = [ref.workspace, ref.id, String(ref.createdAt)].map(encodeURIComponent);
  return `executions/${segments[0]}/${segments[1]}/${segments[2]}.json.gz`;
}

/** The archiver of this deployment: null when HISTORY_ARCHIVE is off (./archive-var.ts) or ARCHIVE is not bound. */
export function archiverFor(env: Env, db: D1Database): Archiver | null {
  const vars = env as unknown as { HISTORY_ARCHIVE?: string; ARCHIVE?: R2Bucket };
  if (archiveSetting(vars.HISTORY_ARCHIVE) !== "on" || !vars.ARCHIVE) return null;
  return createArchiver(vars.ARCHIVE, db);
}

/** An archiver writing to `bucket` (tests pass their own bucket and limits). */
export function createArchiver(bucket: R2Bucket, db: D1Database, limits: ArchiveLimits = ARCHIVE_LIMITS): Archiver {
  return async (executions) => {
    const written = new Set<string>();
    if (executions.length === 0) return written;
    const sizes = await readTraceSizes(db, executions);
    const parts: RemovableExecution[][] = [];
    let partBytes = 0;
    let deferred = 0;
    for (const execution of executions) {
      const estimate = sizes.get(execution.id);
      if (estimate === undefined) {
        archiveFailed(execution, "its rows are gone (removed meanwhile)");
        continue;
      }
      if (estimate > limits.maxTraceJsonBytes) {
        archiveFailed(execution, `its trace is estimated at ${estimate} bytes, over ${limits.maxTraceJsonBytes}`, {
          bytes: estimate,
          limit: limits.maxTraceJsonBytes,
        });
        continue;
      }
      const current = parts.at(-1);
      if (current && current.length > 0 && partBytes + estimate <= limits.partBytes) {
        current.push(execution);
        partBytes += estimate;
      } else if (parts.length < limits.maxParts) {
        parts.push([execution]);
        partBytes = estimate;
      } else {
        deferred += 1;
      }
    }
    if (deferred > 0) {
      // Not a failure of these traces: this call read all it may. The sweep keeps them; its next pass
      // selects them again.
      log.info("history.archive_failed", {
        reason: "deferred",
        deferred,
        message: `${deferred} traces left for the next pass: one archive call reads at most ${limits.maxParts} parts`,
      });
    }
    const byId = new Map<string, RemovableExecution>();
    for (const part of parts) {
      const records = await readTraceRecordsForSet(db, part);
      await eachLimited(part, limits.putConcurrency, async (execution) => {
        const rows = records.get(execution.id);
        if (!rows) {
          archiveFailed(execution, "its rows are gone (removed meanwhile)");
          return;
        }
        records.delete(execution.id);
        if (await writeTrace(bucket, execution, { ...buildTrace(rows), archived: true }, limits)) {
          written.add(execution.id);
          byId.set(execution.id, execution);
        }
      });
    }
    await dropErasedMeanwhile(bucket, db, written, byId);
    return written;
  };
}

/**
 * After the puts: an execution erased between the read of its trace and its put (the erasure's
 * removal committed, and its deletion of the objects may have run before this put landed) loses
 * the object written here, and is not reported written. Either this check runs after the erasure's
 * removal committed and sees it, or it runs before — then the put landed before the erasure
 * listed the objects, and the erasure deletes it. One statement (`erasedMeanwhile`).
 */
async function dropErasedMeanwhile(
  bucket: R2Bucket,
  db: D1Database,
  written: Set<string>,
  byId: ReadonlyMap<string, RemovableExecution>,
): Promise<void> {
  const erased = await erasedMeanwhile(db, [...written]);
  if (erased.size === 0) return;
  const refs = [...erased].map((id) => byId.get(id)!);
  await bucket.delete(refs.map(archiveKey));
  for (const ref of refs) {
    written.delete(ref.id);
    log.info("history.archive_failed", {
      executionId: ref.id,
      workspace: ref.workspace,
      reason: "erased meanwhile",
      message: `execution ${ref.id} was erased while its trace was being archived: the object written is deleted`,
    });
  }
}

/** Encodes, compresses and puts one trace; false (logged) when it is over a cap or the put failed. */
async function writeTrace(bucket: R2Bucket, execution: RemovableExecution, trace: ArchivedTrace, limits: ArchiveLimits): Promise<boolean> {
  const json = new TextEncoder().encode(JSON.stringify(trace));
  if (json.byteLength > limits.maxTraceJsonBytes) {
    archiveFailed(execution, `its trace is ${json.byteLength} bytes of JSON, over ${limits.maxTraceJsonBytes}`, {
      bytes: json.byteLength,
      limit: limits.maxTraceJsonBytes,
    });
    return false;
  }
  const gzipped = await gzip(json, limits.maxObjectBytes);
  if (gzipped === null) {
    archiveFailed(execution, `its trace compresses to more than ${limits.maxObjectBytes} bytes`, {
      bytes: json.byteLength,
      limit: limits.maxObjectBytes,
    });
    return false;
  }
  try {
    await bucket.put(archiveKey(execution), gzipped, {
      httpMetadata: { contentType: OBJECT_CONTENT_TYPE },
      customMetadata: {
        format: OBJECT_FORMAT,
        workspace: execution.workspace,
        executionId: execution.id,
        createdAt: String(execution.createdAt),
        jsonBytes: String(json.byteLength),
      },
    });
    return true;
  } catch (error) {
    archiveFailed(execution, "the R2 put failed", { error: error instanceof Error ? error.message : String(error) });
    return false;
  }
}

function archiveFailed(execution: RemovableExecution, why: string, fields: Record<string, unknown> = {}): void {
  log.warn("history.archive_failed", {
    executionId: execution.id,
    workspace: execution.workspace,
    reason: why,
    ...fields,
    message: `execution ${execution.id} was not archived: ${why}; it stays in D1`,
  });
}

/**
 * `readArchivedTrace`: the archived trace of a swept execution, or null when its object is missing
 * (or is not this execution's). The caller found `ref` by its workspace (the tombstone), and the
 * key holds the workspace, so another workspace's id never reaches an object here.
 */
export async function readArchivedTrace(
  bucket: R2Bucket,
  ref: ArchiveRef,
  limits: ArchiveLimits = ARCHIVE_LIMITS,
): Promise<ArchivedTrace | null> {
  const object = await bucket.get(archiveKey(ref));
  if (object === null) return null;
  if (object.customMetadata?.workspace !== undefined && object.customMetadata.workspace !== ref.workspace) return null;
  let trace: ArchivedTrace;
  try {
    const json = await gunzip(object.body, limits.maxTraceJsonBytes);
    if (json === null) return null;
    trace = JSON.parse(new TextDecoder().decode(json)) as ArchivedTrace;
  } catch {
    return null; // not gzip, not JSON: not an object this archive wrote
  }
  return trace.executionId === ref.id ? { ...trace, archived: true } : null;
}

/**
 * `findArchivedTrace`: the newest archived trace under an execution id in `workspace`, found by
 * listing its objects — for an execution whose tombstone (which holds `createdAt`, the last part
 * of the key) has expired. One R2 list, and one get when there is an object; null when none.
 */
export async function findArchivedTrace(
  bucket: R2Bucket,
  workspace: string,
  executionId: string,
): Promise<{ trace: ArchivedTrace; uploaded: Date } | null> {
  const page = await bucket.list({ prefix: executionPrefix({ workspace, id: executionId }), limit: 1000 });
  let newest: { createdAt: number; uploaded: Date } | null = null;
  for (const object of page.objects) {
    const createdAt = Number(/\/(\d+)\.json\.gz$/.exec(object.key)?.[1]);
    if (Number.isSafeInteger(createdAt) && (newest === null || createdAt > newest.createdAt))
      newest = { createdAt, uploaded: object.uploaded };
  }
  if (newest === null) return null;
  const trace = await readArchivedTrace(bucket, { id: executionId, workspace, createdAt: newest.createdAt });
  return trace ? { trace, uploaded: newest.uploaded } : null;
}

/** Every archive object of an execution id in a workspace: its own, and any of an earlier run under the same id. */
const executionPrefix = (ref: Omit<ArchiveRef, "createdAt">): string =>
  `executions/${encodeURIComponent(ref.workspace)}/${encodeURIComponent(ref.id)}/`;

/**
 * `deleteArchivedTrace`: deletes the archive objects of the execution's id in its workspace — its
 * own (`archiveKey`) and any left by an earlier run that had the same id (the id is the trigger's
 * identity: the same trigger, whose tombstone has expired) — and returns how many there were. An
 * erasure is of the trigger's data, and those objects are unreachable through the API anyway.
 */
export async function deleteArchivedTrace(bucket: R2Bucket, ref: ArchiveRef): Promise<number> {
  let deleted = 0;
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix: executionPrefix(ref), cursor, limit: 1000 });
    const keys = page.objects.map((o) => o.key);
    if (keys.length > 0) await bucket.delete(keys);
    deleted += keys.length;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return deleted;
}

/** `deleteArchivedTraces`: `deleteArchivedTrace` for each of `refs` (at most 6 requests at once); how many objects there were. */
export async function deleteArchivedTraces(bucket: R2Bucket, refs: readonly ArchiveRef[]): Promise<number> {
  let deleted = 0;
  await eachLimited(refs, ARCHIVE_LIMITS.putConcurrency, async (ref) => {
    deleted += await deleteArchivedTrace(bucket, ref);
  });
  return deleted;
}

// ---------------------------------------------------------------------------------------------
// gzip, buffered and bounded

/** `bytes` gzip-compressed into one buffer (R2's put needs a known length); null past `maxBytes`. */
export async function gzip(bytes: Uint8Array, maxBytes: number): Promise<Uint8Array | null> {
  const compressed = new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip"));
  return collect(compressed, maxBytes);
}

/** A gzip stream inflated into one buffer; null past `maxBytes` (a corrupt or foreign object). */
async function gunzip(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array | null> {
  return collect(stream.pipeThrough(new DecompressionStream("gzip")), maxBytes);
}

/** The stream in one buffer, or null past `maxBytes` (the rest never buffered). */
async function collect(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array | null> {
  try {
    return await readAtMost(stream, null, maxBytes);
  } catch (error) {
    if (error instanceof BodyTooLargeError) return null;
    throw error;
  }
}

/** `work` over `items`, at most `limit` at once, in order of start. */
async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
