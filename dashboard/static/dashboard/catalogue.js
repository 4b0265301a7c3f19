// The catalogue's figures without reloading: every few seconds, while the page is seen, the
// figures of the rows on this page and the tab counts (one request, paged as the page is).
// Rows are not added or removed: an on-sale that changed group stays until the next load.
(function () {
  "use strict";
  var table = document.getElementById("catalogue");
  if (!table) return;
  var url = table.getAttribute("data-figures-url");
  var every = 1000 * Number(table.getAttribute("data-refresh-seconds") || 5);
  function set(node, value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (node && node.textContent !== text) node.textContent = text;
  }
  // As events.models.EventMode labels them.
  function modeLabel(mode) {
    var text = mode.replace("_", " ");
    return text.charAt(0).toUpperCase() + text.slice(1);
  }
  function show(data) {
    Object.keys(data.counts).forEach(function (group) {
      set(document.querySelector('[data-count="' + group + '"]'), data.counts[group]);
    });
    table.querySelectorAll("tr[data-event]").forEach(function (row) {
      var figures = data.rows[row.getAttribute("data-event")];
      if (!figures) return;
      var state = row.querySelector('[data-fig="state"]');
      set(state, figures.state);
      state.className = "state state-" + figures.state;
      var mode = row.querySelector('[data-fig="mode"]');
      if (mode && figures.mode) {
        set(mode, modeLabel(figures.mode));
        mode.className = "mode mode-" + figures.mode;
      }
      set(row.querySelector('[data-fig="waiting"]'), figures.waiting);
      set(row.querySelector('[data-fig="active"]'), figures.active);
      set(row.querySelector('[data-fig="pace"]'), figures.pace === null ? "no pace limit" : figures.pace);
      set(row.querySelector('[data-fig="pace_source"]'), figures.pace_source);
    });
  }
  function refresh() {
    if (document.hidden) { setTimeout(refresh, every); return; }
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(show)
      .catch(function () {})
      .then(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
