/**
 * The `{{ secrets.NAME }}` template and a secret's name, as text: a leaf module (no imports), so the
 * definition schema, the event sources and the OpenAPI document state the very pattern the validators
 * test (src/definitions/secrets.ts, src/events/source-definition.ts).
 */

/** A secret name (workspace or Worker): letters, digits and `_`, not starting with a digit. */
const SECRET_NAME_SOURCE = "[A-Za-z_][A-Za-z0-9_]{0,127}";

export const SECRET_NAME_PATTERN = new RegExp(`^${SECRET_NAME_SOURCE}$`);

/** A well-formed template; group 1 is the name. Use a fresh `new RegExp(…, "g")` per scan. */
export const SECRET_TEMPLATE_SOURCE = String.raw`\{\{\s*secrets\.(` + SECRET_NAME_SOURCE + String.raw`)\s*\}\}`;

/** A value that is exactly one template (surrounding space allowed): a signing secret's rule. */
export const WHOLE_SECRET_TEMPLATE_SOURCE = String.raw`^\s*` + SECRET_TEMPLATE_SOURCE + String.raw`\s*$`;
