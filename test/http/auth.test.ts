/**
 * Bearer token → workspace (src/http/auth.ts): the configured tokens' digests are computed once per
 * `API_TOKENS` value and the presented token is hashed once per request.
 */
import { describe, expect, it } from "vitest";
import { workspaceForToken } from "../../src/http/auth";

describe("workspaceForToken", () => {
  it("names the workspace of the matching token, and none for a prefix, an extension or an empty token", async () => {
    const spec = "dev-token:dev,other-token:other";
    expect(await workspaceForToken(spec, "dev-token")).toBe("dev");
    expect(await workspaceForToken(spec, "other-token")).toBe("other");
    expect(await workspaceForToken(spec, "dev-toke")).toBeUndefined();
    expect(await workspaceForToken(spec, "dev-token2")).toBeUndefined();
    expect(await workspaceForToken(spec, "")).toBeUndefined();
  });

  it("follows a changed API_TOKENS value: a rotated-out token stops working at once", async () => {
    expect(await workspaceForToken("old-token:dev", "old-token")).toBe("dev");
    expect(await workspaceForToken("new-token:dev", "old-token")).toBeUndefined();
    expect(await workspaceForToken("new-token:dev", "new-token")).toBe("dev");
    expect(await workspaceForToken(undefined, "new-token")).toBeUndefined();
  });
});
