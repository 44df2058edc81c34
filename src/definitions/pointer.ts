/**
 * JSON Pointers (RFC 6901) for validation errors: every error names the exact place to fix,
 * e.g. `/vertices/1/config/headers/Idempotency-Key`.
 */
export type PathSegment = string | number;

/** `["vertices", 1, "config"]` → `/vertices/1/config`; `~` and `/` in keys are escaped as `~0`, `~1`. */
export function toPointer(path: readonly PathSegment[]): string {
  return path.map((segment) => `/${String(segment).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
}

/** Join a base pointer and more segments. */
export function pointerOf(...path: PathSegment[]): string {
  return toPointer(path);
}
