// Live figures without reloading: fetch the on-sale's stats every two seconds. Controls need
// no script: each goes to a confirmation page that says what it will do, in the numbers of
// that moment (dashboard/controls.py).
(function () {
  "use strict";
  var slug = JSON.parse(document.getElementById("dashboard-slug").textContent);
  function set(id, value) { var node = document.getElementById(id); if (node) node.textContent = value; }
  function refresh() {
    fetch("/dashboard/events/" + encodeURIComponent(slug) + "/stats", { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (f) {
        set("fig-state", f.state);
        document.getElementById("fig-state").className = "state state-" + f.state;
        if (f.mode) {
          var text = f.mode.replace("_", " ");  // as events.models.EventMode labels them
          set("fig-mode", text.charAt(0).toUpperCase() + text.slice(1));
          document.getElementById("fig-mode").className = "mode mode-" + f.mode;
        }
        set("fig-waiting", f.waiting);
        set("fig-active", f.active);
        set("fig-capacity", f.capacity || "No cap");
        set("fig-rate", f.rate_per_minute ? f.rate_per_minute + " / min" : "No pace limit");
        set("fig-admissions", f.admissions_per_minute);
        set("fig-arrivals", f.arrivals_per_minute);
        set("fig-abandoned", f.abandoned_last_hour);
        set("fig-wrong-codes", f.wrong_access_codes_last_hour);
        set("fig-wait", f.wait_text);
        ["waiting", "arrivals", "admissions"].forEach(function (name) {
          document.getElementById("chart-" + name).innerHTML = f.charts[name];
        });
      })
      .catch(function () {})
      .then(function () { setTimeout(refresh, 2000); });
  }
  setTimeout(refresh, 2000);
})();
