/**
 * The inspector's only way to data: the same /v1 API as every client, with the bearer token.
 *
 * The token lives in this tab's sessionStorage (gone when the tab closes), is sent only in the
 * `Authorization` header, and never goes into a URL — so it appears in no history, no referrer
 * and no server log line. A 401 forgets it and sends the user back to sign-in.
 */

const TOKEN_KEY = "idemflow.token";

export const session = {
  token: () => sessionStorage.getItem(TOKEN_KEY),
  signIn: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  signOut: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** An answer other than 2xx, with its problem+json when it has one. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

/** Called on every 401 (the page shows sign-in again). */
let onUnauthorized = () => {};
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

/**
 * `api("GET", "/v1/executions")` → the parsed JSON body; throws ApiError otherwise.
 * `idempotencyKey` is sent as `Idempotency-Key` (the operator actions need one).
 */
export async function api(method, path, options = {}) {
  return (await apiResponse(method, path, options)).body;
}

/** `api` with the answer's headers too: `{ body, headers }` (an archived trace says when it was removed in a header). */
export async function apiResponse(method, path, { body, idempotencyKey, token = session.token(), signal } = {}) {
  const headers = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  if (idempotencyKey) headers["idempotency-key"] = idempotencyKey;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the error says the status
  }
  if (res.status === 401) {
    session.signOut();
    onUnauthorized();
  }
  if (!res.ok) throw new ApiError(res.status, parsed);
  return { body: parsed, headers: res.headers };
}

/** A fresh `Idempotency-Key` for one operator action (one per confirmation dialog: a double click re-sends the same key). */
export function newActionKey(action) {
  return `ui-${action}-${crypto.randomUUID()}`;
}

/**
 * Follow `GET /v1/executions/{id}/events` (server-sent events read with fetch, since EventSource
 * cannot send `Authorization`). Each event calls `onEvent({ id, event, data })`. The server ends
 * each connection after its bound (`stream.end`); this reconnects with `Last-Event-ID`, so no
 * change is missed or repeated, until the execution finishes or `stop()` is called. When the
 * stream cannot be read (an older engine without the route, a network error), `onFallback` is
 * called once and the caller polls instead.
 */
export function followExecution(executionId, { onEvent, onFallback, onFinished }) {
  const controller = new AbortController();
  let lastEventId = null;
  let stopped = false;
  let failures = 0;

  const connect = async () => {
    while (!stopped) {
      let finished = false;
      try {
        const headers = { accept: "text/event-stream", authorization: `Bearer ${session.token()}` };
        if (lastEventId) headers["last-event-id"] = lastEventId;
        const res = await fetch(`/v1/executions/${encodeURIComponent(executionId)}/events`, { headers, signal: controller.signal });
        if (res.status === 401) {
          session.signOut();
          onUnauthorized();
          return;
        }
        if (!res.ok || !res.body || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
          onFallback?.(`the event stream answered ${res.status}`);
          return;
        }
        failures = 0;
        let retryMs = 1000;
        for await (const e of readEvents(res.body)) {
          if (e.retry !== undefined) retryMs = e.retry;
          if (!e.event && e.data === undefined) continue;
          if (e.id) lastEventId = e.id;
          if (e.event === "execution.finished") finished = true;
          if (e.event !== "stream.end") onEvent({ id: e.id, event: e.event, data: e.data });
        }
        if (finished) {
          onFinished?.();
          return;
        }
        await pause(retryMs);
      } catch (error) {
        if (stopped || error?.name === "AbortError") return;
        failures += 1;
        if (failures >= 5) {
          onFallback?.(`the event stream failed ${failures} times: ${error?.message ?? error}`);
          return;
        }
        await pause(1000 * failures);
      }
    }
  };
  void connect();
  return {
    stop() {
      stopped = true;
      controller.abort();
    },
  };
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Parse a text/event-stream body into `{ id, event, data, retry }` records (data JSON-parsed when it is JSON). */
async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const record = {};
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(text);
        else if (field === "id") record.id = text;
        else if (field === "event") record.event = text;
        else if (field === "retry" && /^\d+$/.test(text)) record.retry = Number(text);
      }
      if (data.length > 0) {
        const joined = data.join("\n");
        try {
          record.data = JSON.parse(joined);
        } catch {
          record.data = joined;
        }
      }
      yield record;
    }
  }
}
