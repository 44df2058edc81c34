/** Reading a JSON object body for the demo routes, with problem+json answers for bad input. */
import { ProblemError, problems } from "../../src/lib/problem";

const MAX_BODY_BYTES = 64 * 1024;

export async function readJsonObject(request: { text(): Promise<string> }): Promise<Record<string, unknown>> {
  const text = await request.text();
  if (text.length > MAX_BODY_BYTES) throw problems.payloadTooLarge(MAX_BODY_BYTES);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw problems.malformedJson(
      text.length === 0
        ? "The request body is empty"
        : `The request body does not parse as JSON (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ProblemError({
      status: 422,
      code: "demo-body-not-object",
      title: "Body must be a JSON object",
      detail: 'Send a JSON object, e.g. {"order": "A-1001", "amount": 42}.',
    });
  }
  return value as Record<string, unknown>;
}

/** A business identifier from the body: strings as is, numbers as their decimal text. */
export function identifierOf(value: unknown): string | null {
  if (typeof value === "string" && value.length > 0) return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return null;
}
