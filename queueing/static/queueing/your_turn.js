// "It's your turn", wherever the fan is: a browser notification (asked for only when the fan
// presses "Notify me"), an optional chime (off unless the fan ticks it; remembered here), and,
// while the tab is in the background, a flashing title and a held page with a button to the
// shop. waiting.js calls window.wrYourTurn.arrive(url) when the fan is let in.
(function () {
  "use strict";
  var CHIME_KEY = "wr-chime";
  var cfgNode = document.getElementById("wr-config");
  if (!cfgNode) return;
  var cfg = JSON.parse(cfgNode.textContent);
  var S = cfg.strings;
  var audio = null;  // an AudioContext, made on the fan's own click (browsers need a gesture)

  function $(id) { return document.getElementById(id); }

  function canNotify() { return "Notification" in window; }

  function showNotifyState() {
    var button = $("notify-me"), state = $("notify-state");
    if (!button) return;
    if (!canNotify() || Notification.permission === "denied") {
      button.hidden = true;
      state.textContent = canNotify() ? S.notifyDenied : "";
    } else if (Notification.permission === "granted") {
      button.hidden = true;
      state.textContent = S.notifyOn;
    } else {
      button.hidden = false;
      state.textContent = "";
    }
  }

  function audioContext() {
    var Context = window.AudioContext || window.webkitAudioContext;
    if (!Context) return null;
    if (!audio) audio = new Context();
    if (audio.state === "suspended") audio.resume();
    return audio;
  }

  // Two soft notes, made here: no sound file to fetch.
  function chime() {
    var context = audioContext();
    if (!context) return;
    [659.25, 880].forEach(function (frequency, i) {
      var start = context.currentTime + i * 0.22;
      var tone = context.createOscillator(), gain = context.createGain();
      tone.type = "sine";
      tone.frequency.value = frequency;
      gain.gain.setValueAtTime(0.0001, start);
      gain.gain.exponentialRampToValueAtTime(0.25, start + 0.02);
      gain.gain.exponentialRampToValueAtTime(0.0001, start + 0.5);
      tone.connect(gain).connect(context.destination);
      tone.start(start);
      tone.stop(start + 0.55);
    });
  }

  function chimeWanted() {
    try { return window.localStorage.getItem(CHIME_KEY) === "on"; } catch (e) { return false; }
  }

  function setup() {
    var controls = $("turn-alerts");
    if (!controls) return;
    controls.hidden = false;  // without a script none of this could work, so it stays hidden
    showNotifyState();
    $("notify-me").addEventListener("click", function () {
      var asked = Notification.requestPermission(showNotifyState);
      if (asked && asked.then) asked.then(showNotifyState);
    });
    var box = $("chime");
    box.checked = chimeWanted();
    box.addEventListener("change", function () {
      try { window.localStorage.setItem(CHIME_KEY, box.checked ? "on" : "off"); } catch (e) { /* private mode */ }
      if (box.checked) chime();  // the fan hears what they chose, and the click unlocks audio
    });
    if (box.checked) {
      // A chime chosen on an earlier visit: audio may start only after a gesture on this page.
      var unlock = function () { audioContext(); document.removeEventListener("pointerdown", unlock); };
      document.addEventListener("pointerdown", unlock);
    }
  }

  function flashTitle(title) {
    var plain = document.title, on = false;
    var timer = setInterval(function () {
      if (!document.hidden) { clearInterval(timer); document.title = title; return; }
      on = !on;
      document.title = on ? "🔔 " + title : plain;
    }, 1000);
    document.title = "🔔 " + title;
  }

  // The fan is let in. In front of them: go at once (as before). In the background: the pass is
  // already theirs (the page fetched it), so hold the page, call them back, and go on as soon
  // as they look. Returns true when it took over the going.
  function arrive(url) {
    if (chimeWanted()) chime();
    if (!document.hidden) return false;
    var title = S.yourTurnTitle + " – " + cfg.eventName;
    flashTitle(title);
    $("your-turn").hidden = false;
    $("go-to-shop").href = url;
    var live = $("live");
    if (live) live.hidden = true;
    if (canNotify() && Notification.permission === "granted") {
      try {
        var note = new Notification(title, { body: S.yourTurnBody, tag: "wr-your-turn-" + cfg.eventSlug, requireInteraction: true });
        note.onclick = function () { window.focus(); note.close(); window.location.assign(url); };
      } catch (e) { /* some browsers allow notifications only from a service worker */ }
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) window.location.assign(url);
    });
    return true;
  }

  window.wrYourTurn = { arrive: arrive };
  setup();
})();
