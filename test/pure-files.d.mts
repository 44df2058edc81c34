/** Test files that reach only src/, vitest and npm packages (./pure-files.mjs): test/apply-migrations.ts skips them. */
export function isPureTestFile(root: string, file: string): boolean;

/** The absolute paths of the pure test files matching `patterns` (globs relative to `root`). */
export function pureTestFiles(root: string, patterns: string[]): string[];
