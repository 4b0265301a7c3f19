// "Preview the line" on the on-sale's change form: the link opens the dashboard's preview of
// the saved settings; this puts the capacity, rate and session as they stand in the form
// (saved or not) in its address as the link is followed. Only these three: nothing else of
// the form ends up in an address (the preview reads nothing else).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  const link = document.getElementById("line-preview-link");
  if (!link) return;
  const names = ["capacity", "rate_per_minute", "session_seconds"];
  const follow = () => {
    const url = new URL(link.getAttribute("href"), window.location.href);
    url.search = "";
    for (const name of names) {
      const input = document.getElementById(`id_${name}`);
      if (input && input.value.trim() !== "") url.searchParams.set(name, input.value.trim());
    }
    link.href = url.toString();
  };
  // Before the browser follows the link (a click, the keyboard, a middle click).
  link.addEventListener("click", follow);
  link.addEventListener("auxclick", follow);
});
