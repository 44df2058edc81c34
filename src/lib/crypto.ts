/** Hashing and comparison helpers on WebCrypto (available in Workers and in Node ≥ 20). */

const encoder = new TextEncoder();

export type Bytes = Uint8Array<ArrayBuffer>;

export function utf8(text: string): Bytes {
  return encoder.encode(text) as Bytes;
}

export async function sha256(data: Bytes | string): Promise<Bytes> {
  const bytes = typeof data === "string" ? utf8(data) : data;
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

export function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export async function sha256Hex(data: Bytes | string): Promise<string> {
  return toHex(await sha256(data));
}

export async function hmacSha256(secret: string, data: Bytes | string): Promise<Bytes> {
  const key = await crypto.subtle.importKey("raw", utf8(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const bytes = typeof data === "string" ? utf8(data) : data;
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, bytes));
}

/**
 * Constant-time string comparison: both sides are hashed first so that neither the length nor
 * the position of the first difference shows in the timing.
 */
export async function timingSafeEqualStrings(a: string, b: string): Promise<boolean> {
  const [ha, hb] = await Promise.all([sha256(a), sha256(b)]);
  return equalDigests(ha, hb);
}

/** Constant-time comparison of two digests of the same length (no early exit). */
export function equalDigests(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Concatenate byte arrays. */
export function concatBytes(parts: Uint8Array[]): Bytes {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}
