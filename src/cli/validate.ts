/**
 * `npm run validate -- workflows/*.json`: offline validation with exactly `validateDefinition`,
 * the function the API runs on PUT. This module is pure (no file system) so the tests run it in
 * workerd; scripts/validate.mjs reads the files and wrangler.toml, and sets the exit code.
 */
import { validateDefinition } from "../definitions/validate";
import { errorMessage } from "../lib/log";

export interface SourceFile {
  path: string;
  text: string;
}

export interface Report {
  /** One line per error: `file pointer message [code]`; the root pointer prints as `(root)`. */
  lines: string[];
  errorCount: number;
  fileCount: number;
}

export function validateFiles(files: SourceFile[], options: { crons?: readonly string[] } = {}): Report {
  const lines: string[] = [];
  for (const file of files) {
    let json: unknown;
    try {
      json = JSON.parse(file.text);
    } catch (error) {
      lines.push(`${file.path} (root) the file is not valid JSON: ${errorMessage(error)} [malformed-json]`);
      continue;
    }
    const result = validateDefinition(json, options);
    if (result.ok) continue;
    for (const e of result.errors) lines.push(`${file.path} ${e.pointer === "" ? "(root)" : e.pointer} ${e.message} [${e.code}]`);
  }
  return { lines, errorCount: lines.length, fileCount: files.length };
}
