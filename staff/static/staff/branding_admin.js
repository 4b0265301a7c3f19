// The contrast check next to the accent colour, kept up to date as staff type (the same WCAG
// maths as queueing/rules/branding.py, which decides the warning on save and in the preview).
"use strict";
// Loaded in the admin's <head>: wait for the form.
document.addEventListener("DOMContentLoaded", function () {
  const input = document.getElementById("id_accent_color");
  const shown = document.querySelector(".field-accent_contrast .readonly");
  if (!input || !shown) return;
  const linear = (c) => (c <= 0.04045 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4));
  const luminance = (hex) => {
    const [r, g, b] = [1, 3, 5].map((i) => linear(parseInt(hex.slice(i, i + 2), 16) / 255));
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const update = () => {
    const value = input.value.trim();
    if (value === "") {
      shown.textContent = "The room's own green (9.1:1 with white).";
    } else if (!/^#[0-9a-fA-F]{6}$/.test(value)) {
      shown.textContent = "Give a colour like #1d4ed8.";
    } else {
      const ratio = 1.05 / (luminance(value) + 0.05);
      const low = Math.round(ratio * 100) / 100 < 4.5;
      shown.textContent = `${ratio.toFixed(2)}:1 with white (${low ? "too low: hard to read" : "fine"}; 4.5:1 or more is needed).`;
    }
  };
  input.addEventListener("input", update);
});
