// The engine's HTTP API as the benches call it: the local dev token, JSON in and out.

export const HEADERS = { authorization: "Bearer dev-token", "content-type": "application/json" };

/** One API call; a non-2xx answer throws with its status and the start of its body. */
export async function api(baseUrl, method, path, body) {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: HEADERS,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}
