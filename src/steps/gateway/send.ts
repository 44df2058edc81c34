/**
 * Phase 5 of a Gateway attempt: the one network call. The timeout covers the response AND its
 * body (a destination that trickles its body is as stuck as one that never answers), and the body
 * is read under `maxResponseBytes`. What went wrong comes back as data for ./classify.ts; the
 * lease heartbeat around the whole attempt is run-step's.
 */
import { readBoundedText, ResponseTooLargeError } from "../http-response";

export type SendResult =
  | { kind: "answered"; response: Response; text: string }
  | { kind: "too_large"; error: ResponseTooLargeError }
  | { kind: "timed_out"; timeoutMs: number }
  | { kind: "network_error"; error: unknown };

export async function send(
  request: Request,
  limits: { timeoutMs: number; maxResponseBytes: number },
  fetcher: typeof fetch,
): Promise<SendResult> {
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, limits.timeoutMs);
  try {
    const response = await fetcher(request, { signal: controller.signal });
    const text = await readBoundedText(response, limits.maxResponseBytes);
    return { kind: "answered", response, text };
  } catch (error) {
    // Too large is final even if the timer fired as well: a retry would read the same body.
    if (error instanceof ResponseTooLargeError) return { kind: "too_large", error };
    // After an abort the error is whatever the fetch implementation throws; the flag says why.
    if (timedOut) return { kind: "timed_out", timeoutMs: limits.timeoutMs };
    return { kind: "network_error", error };
  } finally {
    clearTimeout(timer);
  }
}
