/**
 * Outbound host allowlist: `OUTBOUND_ALLOWLIST` is a comma-separated `host:port` list (a `*`
 * entry allows everything, for deployments that choose so explicitly). Ports default by scheme,
 * so `http://localhost:8788/x` is `localhost:8788` and `https://api.example.com` is
 * `api.example.com:443`.
 */

export function hostPortOf(url: URL): string {
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return `${url.hostname.toLowerCase()}:${port}`;
}

export function parseAllowlist(spec: string | undefined): Set<string> {
  return new Set(
    (spec ?? "")
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s.length > 0),
  );
}

export function isAllowed(url: URL, spec: string | undefined): boolean {
  const allowed = parseAllowlist(spec);
  return allowed.has("*") || allowed.has(hostPortOf(url));
}
