import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import wranglerToml from "../wrangler.toml?raw";
import { configuredCrons, cronsFromWranglerToml } from "../src/definitions/crons";

describe("wrangler.toml", () => {
  it("lists in the CRONS var exactly the crons of [triggers]", () => {
    expect(configuredCrons(env)).toEqual(cronsFromWranglerToml(wranglerToml));
  });
});
