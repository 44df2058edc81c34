/**
 * Turning a handler's response into a stored row, and a stored row back into a replay.
 *
 * The body is read at most `maxStoredBodyBytes + 1` bytes into memory. Within the bound, the
 * bytes are stored verbatim and the caller gets a copy; over it, the row stores a 500 sentinel
 * (so a replay fails loudly instead of returning a truncated body) while the caller still gets
 * the full original body, streamed from the bytes already read followed by the rest.
 */
import type { StoredResponse } from "../../ledger";
import { concatBytes, utf8 } from "../../lib/crypto";
import { idempotencyProblems } from "./problems";
import { PROBLEM_CONTENT_TYPE, problemBody } from "../../lib/problem";

export const REPLAYED_HEADER = "idempotent-replayed";

/** Statuses whose responses never carry a body (RFC 9110); they are stored and replayed bodiless. */
const BODILESS = new Set([204, 205, 304]);

export interface Captured {
  /** What the original caller receives: the handler's response, body intact. */
  forCaller: Response;
  /** What the ledger keeps for replays. */
  stored: StoredResponse;
}

export async function captureResponse(
  response: Response,
  { replayHeaders, maxStoredBodyBytes }: { replayHeaders: readonly string[]; maxStoredBodyBytes: number },
): Promise<Captured> {
  const headers: Record<string, string> = {};
  for (const name of replayHeaders) {
    const value = response.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  if (BODILESS.has(response.status) || response.body === null) {
    return { forCaller: response, stored: { status: response.status, headers, body: null } };
  }

  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let done = false;
  while (size <= maxStoredBodyBytes) {
    const next = await reader.read();
    if (next.done) {
      done = true;
      break;
    }
    chunks.push(next.value);
    size += next.value.byteLength;
  }
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };

  if (done) {
    const body = concatBytes(chunks);
    return { forCaller: new Response(body, init), stored: { status: response.status, headers, body } };
  }

  // Over the bound: hand the caller everything (what was read, then the rest of the stream).
  const rest = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    async pull(controller) {
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return { forCaller: new Response(rest, init), stored: sentinel(maxStoredBodyBytes) };
}

/** The stored stand-in for a response too large to keep: the problem a replay answers with. */
function sentinel(limitBytes: number): StoredResponse {
  const p = idempotencyProblems.responseTooLarge(limitBytes);
  return { status: p.status, headers: { "content-type": PROBLEM_CONTENT_TYPE }, body: utf8(JSON.stringify(problemBody(p))) };
}

/** A stored row as a response, marked `Idempotent-Replayed: true`. */
export function replayResponse(stored: StoredResponse): Response {
  const headers = new Headers(stored.headers);
  headers.set(REPLAYED_HEADER, "true");
  const body = BODILESS.has(stored.status) ? null : (stored.body ?? null);
  return new Response(body, { status: stored.status, headers });
}
