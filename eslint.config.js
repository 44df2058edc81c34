// Lint: the bug classes Workers punish most (a promise nobody awaited, a promise passed where a
// callback is expected), dead code, and lines over 140 characters. Type-aware: typescript-eslint reads tsconfig.json.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", ".wrangler/", "bench/results/", "src/worker-configuration.d.ts"] },
  {
    files: ["**/*.ts"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/require-await": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "no-unused-private-class-members": "error",
    },
  },
  {
    files: ["**/*.mjs", "**/*.js"],
    extends: [js.configs.recommended],
    languageOptions: { globals: { ...globals.node } },
    rules: { "no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }] },
  },
  // Readable lines: prettier wraps code at 140 but cannot break strings, templates or comments.
  { files: ["**/*.ts", "**/*.mjs", "**/*.js"], rules: { "max-len": ["error", { code: 140, ignoreUrls: true }] } },
);
