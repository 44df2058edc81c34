/**
 * `npm run validate -- workflows/*.json connectors/*.json`: offline validation with exactly the
 * functions the API runs — `validateConnector` (PUT /v1/connectors) and, after resolving the
 * connectors a workflow names against the connector files given or found in connectors/,
 * `validateDefinition` (PUT /v1/workflows). This module is pure (no file system) so the tests run
 * it in workerd; scripts/validate.mjs reads the files and wrangler.toml, and sets the exit code.
 */
import { authorsErrors, resolveConnectors } from "../connectors/resolve";
import type { StoredConnector } from "../connectors/schema";
import { validateConnector } from "../connectors/validate";
import { asRecord } from "../definitions/errors";
import { validateDefinition, type ValidationError } from "../definitions/validate";
import { errorMessage } from "../lib/log";

export interface SourceFile {
  path: string;
  text: string;
}

export interface Report {
  /** One line per error: `file pointer message [code]`; the root pointer prints as `(root)`. */
  lines: string[];
  errorCount: number;
  /** Warnings (a write without a key): printed, not errors. */
  warningCount: number;
  fileCount: number;
}

export interface ValidateFilesOptions {
  crons?: readonly string[];
  /** Connector files the workflows may name, besides the connector files among `files`. */
  connectors?: SourceFile[];
}

const line = (path: string, e: ValidationError, suffix = "") =>
  `${path} ${e.pointer === "" ? "(root)" : e.pointer} ${e.message} [${e.code}]${suffix}`;

export function validateFiles(files: SourceFile[], options: ValidateFilesOptions = {}): Report {
  type Parsed = { path: string; json: unknown } | { path: string; unreadable: string };
  const parsed: Parsed[] = files.map((file) => {
    try {
      return { path: file.path, json: JSON.parse(file.text) as unknown };
    } catch (error) {
      return { path: file.path, unreadable: errorMessage(error) };
    }
  });
  const isConnector = (json: unknown) => asRecord(json)?.vertices === undefined && asRecord(json)?.baseUrl !== undefined;
  // Connectors first (those given, then the others found): every workflow resolves against the valid ones.
  const connectors = new Map<string, StoredConnector>();
  const connectorErrors = new Map<string, ValidationError[]>();
  const given = new Set(files.map((f) => f.path));
  const found = (options.connectors ?? [])
    .filter((f) => !given.has(f.path))
    .flatMap((f) => {
      try {
        return [{ path: f.path, json: JSON.parse(f.text) as unknown }];
      } catch {
        return [];
      }
    });
  for (const file of [...parsed, ...found]) {
    if (!("json" in file) || !isConnector(file.json)) continue;
    const result = validateConnector(file.json);
    if (result.ok) {
      const { name } = result.definition;
      connectors.set(name, { workspace: "", name, version: "0".repeat(64), definition: result.definition, createdAt: 0 });
    } else connectorErrors.set(file.path, result.errors);
  }
  const lines: string[] = [];
  let warningCount = 0;
  for (const file of parsed) {
    if ("unreadable" in file) {
      lines.push(`${file.path} (root) the file is not valid JSON: ${file.unreadable} [malformed-json]`);
      continue;
    }
    if (isConnector(file.json)) {
      for (const e of connectorErrors.get(file.path) ?? []) lines.push(line(file.path, e));
      continue;
    }
    const resolution = resolveConnectors(file.json, connectors);
    const result = validateDefinition(resolution.document, options);
    for (const e of authorsErrors(resolution, result.ok ? [] : result.errors)) lines.push(line(file.path, e));
    if (!result.ok) continue;
    for (const w of result.warnings) {
      lines.push(line(file.path, w, " (warning)"));
      warningCount++;
    }
  }
  return { lines, errorCount: lines.length - warningCount, warningCount, fileCount: files.length };
}
