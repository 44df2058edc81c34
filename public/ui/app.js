/**
 * The inspector: sign-in, then six pages reached by the URL's hash —
 *   #/overview?…           what was stopped over time, the page it opens on (views/overview.js)
 *   #/workflows            the workflows (views/workflows.js)
 *   #/connectors           the connectors, each with its limits' live state (views/connectors.js)
 *   #/executions?…         the executions, with the list filters, live (views/executions.js)
 *   #/executions/{id}      one execution, live (views/execution.js)
 *   #/notifications?…      the notification setting and its deliveries (views/notifications.js)
 * The hash carries ids and filters only, never the token (lib/api.js).
 */
import { h, replace } from "./lib/dom.js";
import { api, session, whenUnauthorized } from "./lib/api.js";
import { showWorkflows } from "./views/workflows.js";
import { showExecutions } from "./views/executions.js";
import { showExecution } from "./views/execution.js";
import { showOverview } from "./views/overview.js";
import { showConnectors } from "./views/connectors.js";
import { showNotifications } from "./views/notifications.js";

const main = document.getElementById("main");
const who = document.getElementById("who");

/** The page shown now; `leave()` stops its polling and streams before the next one. */
let current = null;

function route() {
  current?.leave?.();
  current = null;
  if (!session.token()) return showSignIn();
  replace(who, h("button", { type: "button", class: "link", onclick: signOut }, "Sign out"));
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const parts = (path || "/overview").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "workflows") current = showWorkflows(main);
  else if (parts[0] === "connectors") current = showConnectors(main);
  else if (parts[0] === "notifications") current = showNotifications(main, params);
  else if (parts[0] === "executions" && parts[1]) current = showExecution(main, parts[1]);
  else if (parts[0] === "executions") current = showExecutions(main, params);
  else current = showOverview(main, params);
  main.focus({ preventScroll: true });
}

function signOut() {
  session.signOut();
  route();
}

function showSignIn(message) {
  replace(who);
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    required: true,
    spellcheck: "false",
    "aria-describedby": "token-help",
  });
  const error = h("p", { class: "error", role: "alert" }, message ?? "");
  const submit = async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    try {
      // Checked against the API before it is kept: a wrong token is told at once.
      await api("GET", "/v1/workflows?limit=1", { token });
      session.signIn(token);
      input.value = "";
      route();
    } catch (e) {
      replace(error, e.status === 401 ? "That token is not valid here (401)." : `Could not sign in: ${e.message}`);
    }
  };
  replace(
    main,
    h(
      "section",
      { class: "signin" },
      h("h1", {}, "Sign in"),
      h(
        "form",
        { onsubmit: submit },
        h("label", { for: "token" }, "API token"),
        input,
        h(
          "p",
          { id: "token-help", class: "help" },
          "The bearer token of your workspace (locally: dev-token). It is kept in this tab only and sent in the Authorization header.",
        ),
        h("button", { type: "submit" }, "Sign in"),
        error,
      ),
    ),
  );
  input.focus();
}

whenUnauthorized(() => {
  current?.leave?.();
  current = null;
  showSignIn("Your token was refused (401): sign in again.");
});
window.addEventListener("hashchange", route);
route();
