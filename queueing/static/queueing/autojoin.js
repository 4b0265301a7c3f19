// Joins on arrival by sending the page's own join form (a POST, so previews and scanners
// fetching the link do not take places in line). A form with a proof of work is sent through
// its submit event, which pow.js answers by solving the puzzle first.
(function () {
  "use strict";
  var form = document.querySelector("form[data-autojoin]");
  if (!form) return;
  if (form.hasAttribute("data-pow") && form.requestSubmit) form.requestSubmit();
  else form.submit();
})();
