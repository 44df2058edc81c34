/**
 * The request fingerprint: what makes a retry "the same request".
 *
 * SHA-256 over an unambiguous encoding of: the upper-cased method; the path and query exactly
 * as they appear in the request URL (not re-encoded, not re-ordered); the allowlisted headers
 * (always `content-type`), each as name + present/absent + value; and the raw body bytes. The
 * body is never decoded to text nor re-serialised: bytes that differ are a different request,
 * including JSON with the same members in another order.
 */
import { concatBytes, sha256Hex, utf8 } from "../../lib/crypto";

export interface FingerprintInput {
  method: string;
  url: string;
  headers: Headers;
  /** Lower-cased header names, sorted, without duplicates. */
  headerNames: readonly string[];
  body: Uint8Array | null;
}

export function fingerprintRequest(input: FingerprintInput): Promise<string> {
  const parts: Uint8Array[] = [
    field(utf8("idemflow-fp-v1")),
    field(utf8(input.method.toUpperCase())),
    field(utf8(pathAndQuery(input.url))),
  ];
  for (const name of input.headerNames) {
    const value = input.headers.get(name);
    parts.push(field(utf8(name)), value === null ? ABSENT : field(utf8(value)));
  }
  parts.push(input.body === null ? ABSENT : field(input.body));
  return sha256Hex(concatBytes(parts));
}

/** The path and query verbatim: everything after the authority, without a fragment. */
export function pathAndQuery(url: string): string {
  const afterScheme = url.indexOf("://");
  const authorityStart = afterScheme === -1 ? 0 : afterScheme + 3;
  let start = url.length;
  for (const ch of ["/", "?", "#"]) {
    const at = url.indexOf(ch, authorityStart);
    if (at !== -1 && at < start) start = at;
  }
  const hash = url.indexOf("#", start);
  return url.slice(start, hash === -1 ? undefined : hash);
}

// Length-prefixed fields (a present marker, then a 4-byte big-endian length) so that no two
// different inputs concatenate to the same bytes.
const ABSENT = new Uint8Array([0]);
function field(bytes: Uint8Array): Uint8Array {
  const head = new Uint8Array(5);
  head[0] = 1;
  new DataView(head.buffer).setUint32(1, bytes.byteLength);
  return concatBytes([head, bytes]);
}
