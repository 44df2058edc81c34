// Lint: the bug classes Workers punish most (a promise nobody awaited, a promise passed where a
// callback is expected), dead code, and lines over 140 characters. Type-aware: typescript-eslint reads tsconfig.json.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", ".wrangler/", "bench/results/", "src/worker-configuration.d.ts", "clients/typescript/schema.d.ts"] },
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
  // The inspector runs in the browser. Data becomes text nodes only (public/ui/lib/dom.js): any API that
  // parses a string as markup is refused here, so a payload holding `<script>` can never become markup.
  {
    files: ["public/**/*.js"],
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      "no-restricted-properties": [
        "error",
        ...["innerHTML", "outerHTML"].map((property) => ({ property, message: "build nodes with h() (public/ui/lib/dom.js)" })),
        ...["insertAdjacentHTML", "write", "writeln", "createContextualFragment"].map((property) => ({
          property,
          message: "build nodes with h() (public/ui/lib/dom.js)",
        })),
      ],
      "no-restricted-globals": ["error", "eval"],
    },
  },
  // The browser stories hand functions to the page (page.evaluate): those run there, with its globals.
  { files: ["scripts/lib/browser-stories.mjs"], languageOptions: { globals: { ...globals.node, ...globals.browser } } },
  // Readable lines: prettier wraps code at 140 but cannot break strings, templates or comments.
  { files: ["**/*.ts", "**/*.mjs", "**/*.js"], rules: { "max-len": ["error", { code: 140, ignoreUrls: true }] } },
);
