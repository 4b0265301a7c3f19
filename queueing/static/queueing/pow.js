// Solves the on-sale's proof of work before the join form is sent: find a nonce such that
// sha256(challenge + ":" + nonce) starts with `difficulty` zero bits (queueing/pow.py).
(function () {
  "use strict";
  var form = document.querySelector("form[data-pow]");
  if (!form || !window.crypto || !window.crypto.subtle) return;
  var encoder = new TextEncoder();

  function zeroBits(bytes) {
    var bits = 0;
    for (var i = 0; i < bytes.length; i++) {
      if (bytes[i] === 0) { bits += 8; continue; }
      return bits + Math.clz32(bytes[i]) - 24;
    }
    return bits;
  }

  var MAX_TRIES = 1 << 26;  // far beyond any difficulty the room allows

  async function solve(challenge, difficulty) {
    for (var nonce = 0; nonce < MAX_TRIES; nonce++) {
      var digest = await crypto.subtle.digest("SHA-256", encoder.encode(challenge + ":" + nonce));
      if (zeroBits(new Uint8Array(digest)) >= difficulty) return String(nonce);
    }
    throw new Error("no solution found");
  }

  form.addEventListener("submit", function (event) {
    if (form.elements.pow_nonce.value) return;
    event.preventDefault();
    var button = form.querySelector("button");
    button.disabled = true;
    fetch(form.getAttribute("data-pow"), { credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("challenge refused: " + r.status);
        return r.json();
      })
      .then(function (c) {
        if (typeof c.challenge !== "string" || typeof c.difficulty !== "number") {
          throw new Error("not a challenge");
        }
        return solve(c.challenge, c.difficulty).then(function (nonce) {
          form.elements.pow_challenge.value = c.challenge;
          form.elements.pow_nonce.value = nonce;
          form.submit();
        });
      })
      .catch(function () {
        // Let the fan try again in a moment rather than spin or hang.
        setTimeout(function () { button.disabled = false; }, 3000);
      });
  });
})();
