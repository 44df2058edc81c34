/**
 * The public routes (`/hooks`, `/events`) answer an anonymous caller one 401 `delivery-rejected`
 * (and one 503 `delivery-unavailable`) whatever the reason (src/http/public-answer.ts); the reason
 * goes only to the log. A test that means one reason reads it here: the `code` and `detail` of
 * every `public.refused` / `public.unavailable` line written since the test began, in order.
 */
import { beforeEach, vi } from "vitest";

export function capturePublicRefusals(): { codes: string[]; details: string[] } {
  const seen = { codes: [] as string[], details: [] as string[] };
  beforeEach(() => {
    seen.codes.length = 0;
    seen.details.length = 0;
    for (const level of ["log", "warn"] as const) {
      vi.spyOn(console, level).mockImplementation((line: unknown) => {
        try {
          const parsed = JSON.parse(String(line)) as { event?: string; code?: string; detail?: string };
          if ((parsed.event === "public.refused" || parsed.event === "public.unavailable") && parsed.code) {
            seen.codes.push(parsed.code);
            seen.details.push(parsed.detail ?? "");
          }
        } catch {
          // not a log line
        }
      });
    }
  });
  return seen;
}

/** The uniform refusal's body, as every anonymous refusal answers it. */
export const DELIVERY_REJECTED = { status: 401, code: "delivery-rejected", title: "Delivery not accepted" };
