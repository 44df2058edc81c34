/** Reading a JSON object body for the demo routes, with problem+json answers for bad input. */
import { commonProblems } from "../../src/lib/common-problems";
import { demoProblems } from "./problems";

const MAX_BODY_BYTES = 64 * 1024;

export async function readJsonObject(request: { text(): Promise<string> }): Promise<Record<string, unknown>> {
  const text = await request.text();
  if (text.length > MAX_BODY_BYTES) throw commonProblems.payloadTooLarge(MAX_BODY_BYTES);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw commonProblems.malformedJson(
      text.length === 0
        ? "The request body is empty"
        : `The request body does not parse as JSON (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw demoProblems.bodyNotObject();
  return value as Record<string, unknown>;
}

/** A business identifier from the body: strings as is, numbers as their decimal text. */
export function identifierOf(value: unknown): string | null {
  if (typeof value === "string" && value.length > 0) return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return null;
}
