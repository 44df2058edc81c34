/** The shape of one validation error, shared by the API (422 `errors`) and the CLI. */
export interface ValidationError {
  /** JSON Pointer (RFC 6901) to the offending value, `""` for the whole document. */
  pointer: string;
  /** What is wrong and what to do about it. */
  message: string;
  /** Stable kebab-case identifier of the rule, e.g. `duplicate-vertex-id`. */
  code: string;
}

/** Loose views of not-yet-validated input: the semantic checks run even when the schema failed. */
export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

export function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}
