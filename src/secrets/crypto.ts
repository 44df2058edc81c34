/**
 * Sealing workspace secrets at rest: AES-256-GCM on WebCrypto.
 *
 * - The AES key is derived with HKDF-SHA256 from the Worker secret `SECRETS_MASTER_KEY` (32 random
 *   bytes, base64), so the master key itself is never used directly as a cipher key.
 * - Every write draws a fresh random 96-bit IV: GCM must never reuse an IV under one key.
 * - The additional authenticated data is an unambiguous encoding of (workspace, name): a
 *   ciphertext copied to another workspace's row, or renamed, fails authentication instead of
 *   decrypting there.
 * - Each row records the key id of the master key that sealed it, so a rotation can keep reading
 *   old rows with `SECRETS_MASTER_KEY_PREVIOUS` while every new write uses the new key.
 */
import { concatBytes, sha256, toHex, utf8, type Bytes } from "../lib/crypto";

export const MASTER_KEY_BYTES = 32;
const HKDF_SALT = utf8("idemflow/workspace-secrets");
const HKDF_INFO = utf8("aes-256-gcm v1");

export interface MasterKey {
  /** 16 hex characters identifying the master key; a fingerprint, useless for recovering it. */
  id: string;
  aes: CryptoKey;
}

export interface Keyring {
  /** Seals every write; also opens rows it sealed. */
  current: MasterKey;
  /** During a rotation: opens rows sealed before it, never seals. */
  previous: MasterKey | null;
}

export interface SealedSecret {
  keyId: string;
  iv: string;
  ciphertext: string;
}

/** The deployment's master key is absent or malformed: an operator problem, never the caller's. */
export class MasterKeyError extends Error {
  constructor(variable: string, why: string) {
    super(
      `${variable} ${why}: it must be 32 random bytes, base64-encoded (generate one with \`openssl rand -base64 32\`, ` +
        `set it with \`wrangler secret put ${variable}\`; locally \`npm start\` writes one into .dev.vars)`,
    );
    this.name = "MasterKeyError";
  }
}

/** A stored row does not open: unknown key id, or it fails authentication (altered or moved). */
export class SecretUnreadableError extends Error {
  constructor(
    readonly secretName: string,
    why: string,
  ) {
    super(`the workspace secret ${secretName} cannot be decrypted: ${why}`);
    this.name = "SecretUnreadableError";
  }
}

function fromBase64(text: string): Bytes {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** (workspace, name) as AAD. JSON of an array is unambiguous: no pair of pairs encodes alike. */
export function secretAad(workspace: string, name: string): Bytes {
  return utf8(JSON.stringify(["idemflow-secret-v1", workspace, name]));
}

export async function keyIdOf(raw: Bytes): Promise<string> {
  return toHex(await sha256(concatBytes([utf8("idemflow-secrets-key-id\0"), raw]))).slice(0, 16);
}

const derived = new Map<string, Promise<MasterKey>>();

/** Decode and derive once per isolate: HKDF on every step would be wasted work. */
export function importMasterKey(variable: string, encoded: string): Promise<MasterKey> {
  let raw: Bytes;
  try {
    raw = fromBase64(encoded.trim());
  } catch {
    throw new MasterKeyError(variable, "is not valid base64");
  }
  if (raw.length !== MASTER_KEY_BYTES) throw new MasterKeyError(variable, `decodes to ${raw.length} bytes, not ${MASTER_KEY_BYTES}`);
  let key = derived.get(encoded);
  if (!key) {
    key = (async () => {
      const base = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey"]);
      const aes = await crypto.subtle.deriveKey(
        { name: "HKDF", hash: "SHA-256", salt: HKDF_SALT, info: HKDF_INFO },
        base,
        { name: "AES-GCM", length: 256 },
        false,
        ["encrypt", "decrypt"],
      );
      return { id: await keyIdOf(raw), aes };
    })();
    if (derived.size > 8) derived.clear();
    derived.set(encoded, key);
  }
  return key;
}

/** The keyring of the deployment. Throws `MasterKeyError` when `SECRETS_MASTER_KEY` is unset or malformed. */
export async function keyringFrom(env: Record<string, unknown>): Promise<Keyring> {
  const current = env.SECRETS_MASTER_KEY;
  if (typeof current !== "string" || current.trim() === "") throw new MasterKeyError("SECRETS_MASTER_KEY", "is not set");
  const previous = env.SECRETS_MASTER_KEY_PREVIOUS;
  return {
    current: await importMasterKey("SECRETS_MASTER_KEY", current),
    previous:
      typeof previous === "string" && previous.trim() !== "" ? await importMasterKey("SECRETS_MASTER_KEY_PREVIOUS", previous) : null,
  };
}

export async function sealSecret(keyring: Keyring, workspace: string, name: string, value: string): Promise<SealedSecret> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ciphertext = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: secretAad(workspace, name), tagLength: 128 },
    keyring.current.aes,
    utf8(value),
  );
  return { keyId: keyring.current.id, iv: toBase64(iv), ciphertext: toBase64(new Uint8Array(ciphertext)) };
}

export async function openSecret(keyring: Keyring, workspace: string, name: string, sealed: SealedSecret): Promise<string> {
  const key = [keyring.current, keyring.previous].find((k) => k?.id === sealed.keyId);
  if (!key) {
    throw new SecretUnreadableError(
      name,
      `it was sealed under master key ${sealed.keyId}, which is neither SECRETS_MASTER_KEY (${keyring.current.id}) nor ` +
        `SECRETS_MASTER_KEY_PREVIOUS; ` +
        "restore that key as SECRETS_MASTER_KEY_PREVIOUS, or PUT the secret again",
    );
  }
  let plain: ArrayBuffer;
  try {
    plain = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: fromBase64(sealed.iv), additionalData: secretAad(workspace, name), tagLength: 128 },
      key.aes,
      fromBase64(sealed.ciphertext),
    );
  } catch {
    throw new SecretUnreadableError(
      name,
      "the stored row fails authentication (it was altered, or copied from another workspace or name); PUT the secret again",
    );
  }
  return new TextDecoder().decode(plain);
}
