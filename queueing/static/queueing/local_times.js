// Times shown to fans, in their own time zone with the zone named: each <time data-local>
// the server wrote in UTC (queueing/templatetags/fan_times.py) is written again by the
// browser, which knows its zone. Latin digits, as the rest of the page (README "Languages").
(function () {
  "use strict";
  var lang = document.documentElement.lang || "en";
  // timeStyle/dateStyle cannot be combined with timeZoneName: the parts are named instead.
  var TIME = { hour: "numeric", minute: "2-digit", timeZoneName: "short" };
  var STYLES = {
    time: TIME,
    datetime: { weekday: "short", day: "numeric", month: "long", year: "numeric",
                hour: "numeric", minute: "2-digit", timeZoneName: "short" }
  };
  function formatter(style) {
    try { return new Intl.DateTimeFormat(lang + "-u-nu-latn", STYLES[style]); } catch (e) { return null; }
  }
  var nodes = document.querySelectorAll("time[data-local]");
  for (var i = 0; i < nodes.length; i++) {
    var node = nodes[i];
    var style = STYLES[node.getAttribute("data-local")] ? node.getAttribute("data-local") : "datetime";
    var when = new Date(node.getAttribute("datetime"));
    var format = formatter(style);
    if (!format || isNaN(when.getTime())) continue;  // the server's UTC time stays
    node.textContent = format.format(when);
    node.setAttribute("data-zone", format.resolvedOptions().timeZone || "");
  }
})();
