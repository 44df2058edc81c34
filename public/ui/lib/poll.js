// A page that refreshes itself: `refresh` now, then every `everyMs` while the tab is visible (a
// hidden tab asks nothing). `stop()` ends it when the view is left.
export function pollWhileVisible(refresh, everyMs) {
  void refresh();
  const timer = setInterval(() => {
    if (document.visibilityState === "visible") void refresh();
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}
