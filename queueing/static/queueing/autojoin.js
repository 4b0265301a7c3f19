// Joins on arrival by sending the page's own join form (a POST, so previews and scanners
// fetching the link do not take places in line).
(function () {
  "use strict";
  var form = document.querySelector("form[data-autojoin]");
  if (form) form.submit();
})();
