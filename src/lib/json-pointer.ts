/** JSON Pointer (RFC 6901) tokens: `/a~1b/c~0d` → `["a/b", "c~d"]`; the empty pointer has none. */
export function pointerTokens(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}
