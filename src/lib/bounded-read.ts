/**
 * Reading a body stream with a hard size bound. Used for request bodies (413) and for Gateway
 * responses (the step fails loudly): in both places a body over the bound must never sit whole in
 * memory, and must never be truncated and then used as if it were complete.
 */
import { concatBytes } from "./crypto";

export class BodyTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`the body exceeds ${limitBytes} bytes`);
    this.name = "BodyTooLargeError";
  }
}

/**
 * All bytes of `body`, or `BodyTooLargeError` as soon as more than `limitBytes` arrive. A
 * `declaredLength` (content-length) already over the bound is rejected before reading anything;
 * it is not trusted otherwise, since it can be absent or wrong.
 */
export async function readAtMost(
  body: ReadableStream<Uint8Array> | null,
  declaredLength: string | null,
  limitBytes: number,
): Promise<Uint8Array> {
  if (declaredLength !== null && /^\d+$/.test(declaredLength) && Number(declaredLength) > limitBytes) {
    await body?.cancel().catch(() => undefined);
    throw new BodyTooLargeError(limitBytes);
  }
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limitBytes) {
      // Stop pulling the stream: the rest is never buffered.
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(limitBytes);
    }
    chunks.push(value);
  }
  return chunks.length === 1 ? chunks[0]! : concatBytes(chunks);
}
