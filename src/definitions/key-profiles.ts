/**
 * Destination key profiles: what well-known APIs document about their idempotency keys — where
 * the key travels, how long it may be, which characters it may hold, and how long the API
 * remembers it. Each fact names its public source (docs/definitions.md "Destination keys" cites
 * them in full). Where a source does not state a fact (PayPal's retention varies per API, Square
 * publishes none), the profile says `"required"` and the step must set it: a guess here would
 * become a double charge somewhere else.
 *
 * A step names a profile (`idempotencyKey.profile`) and may override any field.
 */
import { PRINTABLE_ASCII, type KeyAlphabet } from "../lib/key-constraints";

export const KEY_ALPHABETS = {
  "printable-ascii": PRINTABLE_ASCII,
  "url-safe": Object.freeze({
    name: "letters, digits, '-' and '_'",
    ranges: Object.freeze([
      [0x2d, 0x2d] as const,
      [0x30, 0x39] as const,
      [0x41, 0x5a] as const,
      [0x5f, 0x5f] as const,
      [0x61, 0x7a] as const,
    ]),
  }),
  alphanumeric: Object.freeze({
    name: "letters and digits",
    ranges: Object.freeze([[0x30, 0x39] as const, [0x41, 0x5a] as const, [0x61, 0x7a] as const]),
  }),
} as const satisfies Record<string, KeyAlphabet>;

export type KeyAlphabetId = keyof typeof KEY_ALPHABETS;
export const KEY_ALPHABET_IDS = Object.keys(KEY_ALPHABETS) as [KeyAlphabetId, ...KeyAlphabetId[]];

/** Where the key travels: a request header of any name, or a field of the JSON body (a JSON Pointer). */
export type KeyLocation = { header: string } | { bodyField: string };

export interface KeyProfile {
  readonly title: string;
  readonly location: KeyLocation;
  /** Longest key the destination accepts, in characters; "required": not documented, the step sets it. */
  readonly maxLength: number | "required";
  readonly alphabet: KeyAlphabetId;
  /** How long the destination is documented to remember a key, at least; "required": the step sets it. */
  readonly retentionMs: number | "required";
  /** The public documentation each fact comes from. */
  readonly sources: readonly string[];
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export const KEY_PROFILES = {
  stripe: {
    title: "Stripe",
    location: { header: "Idempotency-Key" },
    maxLength: 255,
    alphabet: "printable-ascii",
    // "keys … removed from the system automatically after they're at least 24 hours old"
    retentionMs: 24 * HOUR,
    sources: ["https://docs.stripe.com/api/idempotent_requests"],
  },
  paypal: {
    title: "PayPal",
    location: { header: "PayPal-Request-Id" },
    // The guideline leaves both to each API's reference ("for information about how long the
    // server stores the ID, see the reference for your API").
    maxLength: "required",
    alphabet: "printable-ascii",
    retentionMs: "required",
    sources: ["https://developer.paypal.com/reference/guidelines/idempotency"],
  },
  square: {
    title: "Square",
    location: { bodyField: "/idempotency_key" },
    // The limit differs per endpoint (each request type's reference states its own), and Square
    // does not publish a retention period.
    maxLength: "required",
    alphabet: "printable-ascii",
    retentionMs: "required",
    sources: [
      "https://developer.squareup.com/docs/build-basics/common-api-patterns/idempotency",
      "https://developer.squareup.com/forums/t/how-long-are-idempotency-keys-retained-for-the-createpayment-endpoint/28303",
    ],
  },
  adyen: {
    title: "Adyen",
    location: { header: "Idempotency-Key" },
    maxLength: 64,
    alphabet: "printable-ascii",
    // "valid for a minimum period of 31 days after first submission"
    retentionMs: 31 * DAY,
    sources: ["https://docs.adyen.com/development-resources/api-idempotency"],
  },
  ietf: {
    title: "IETF draft (generic Idempotency-Key header)",
    location: { header: "Idempotency-Key" },
    // The draft leaves length and expiry to the resource, which should publish its expiry policy.
    maxLength: 255,
    alphabet: "printable-ascii",
    retentionMs: "required",
    sources: ["https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/"],
  },
} as const satisfies Record<string, KeyProfile>;

export type KeyProfileId = keyof typeof KEY_PROFILES;
export const KEY_PROFILE_IDS = Object.keys(KEY_PROFILES) as [KeyProfileId, ...KeyProfileId[]];
