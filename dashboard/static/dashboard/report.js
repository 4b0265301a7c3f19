// The report's Print button: shown only where a script runs (the printable view and the
// browser's own Print work without it).
"use strict";
(function () {
  const button = document.getElementById("report-print");
  if (!button) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    window.print();
  });
})();
