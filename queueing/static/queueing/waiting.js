// The waiting page, live. The server publishes one tick per event per second (the same bytes
// for every fan) and sends it to a page as often as its distance from the front asks
// (queueing/rules/tick_bands.py): every second near the front, every few seconds further back,
// at most 10 s apart (30 s while the server is overloaded), and none while the line's index
// is rebuilt. Nothing here is timed by ticks: the countdown runs on its own clock, and each
// tick only updates what it says. This script works out the fan's own place from a tick: its
// order key and tier (from the personal snapshot) against the tick's per-tier (rank, order
// key) checkpoints. Without a WebSocket it polls the ticket API as X-Poll-After-Seconds says.
(function () {
  "use strict";
  // Under Node (tests/queueing/web/test_position_rule_js.py) only the pure rules are wanted; the
  // function declarations below are hoisted, so they can be handed over before any page code.
  if (typeof module !== "undefined" && module.exports) {
    module.exports = { positionInLine: positionInLine, rankIn: rankIn, afterClose: afterClose,
      afterPollRefused: afterPollRefused, estimate: estimate, waitKind: waitKind,
      waitBound: waitBound, statusKind: statusKind };
    return;
  }
  var cfg = JSON.parse(document.getElementById("wr-config").textContent);
  var S = cfg.strings;
  var me = { tierId: null, orderKey: null, tiers: [] };
  var status = cfg.status;
  // What the line is doing, as the page was rendered and then as each tick says: the sale's
  // state, the mode, and the settings that bound a wait still being measured.
  var live = { state: cfg.state, mode: cfg.mode, limits: cfg.limits };
  // Where the fan stood when first placed, for the progress bar: the server keeps it in the
  // page's cookie when it renders the page, and this tab keeps it too, for a page that became
  // the waiting page in place (no render set the cookie) and is reloaded later.
  var FIRST_KEY = "wr-first-position:" + cfg.ticket;
  function firstRemembered() {
    try { return parseInt(window.sessionStorage.getItem(FIRST_KEY), 10) || 0; } catch (e) { return 0; }
  }
  function firstRemember(position) {
    try { window.sessionStorage.setItem(FIRST_KEY, String(position)); } catch (e) { /* private mode */ }
  }
  var firstPosition = Math.max(cfg.firstPosition || 0, firstRemembered()) || null;
  var socket = null;
  var pollTimer = null;
  var checking = false;
  var stopped = false;  // another page of this ticket took its socket: this one only polls

  function $(id) { return document.getElementById(id); }
  function fmt(template, values) {
    // %(name)s takes a figure already written (number()); %(name)d a number, %(name)02d padded.
    return template.replace(/%\((\w+)\)(0?\d*)([ds])/g, function (_, name, pad, kind) {
      if (kind === "s") return String(values[name]);
      var text = String(Math.floor(values[name]));
      var width = parseInt(pad || "0", 10);
      while (text.length < width) text = "0" + text;
      return text;
    });
  }

  // Plurals with the page language's own rule: the catalog script the page loads first
  // (queueing/web/i18n.py, locale/<lang>/djangojs.po) defines django.ngettext; without it
  // (it failed to load) English's rule is the fallback.
  function ngettext(singular, plural, n) {
    if (window.django && window.django.ngettext) return window.django.ngettext(singular, plural, n);
    return n === 1 ? singular : plural;
  }

  // Figures as the server writes them (Django's number formats for the page's language):
  // grouped even with four digits, and always in Latin digits, as Django writes them, so a
  // number does not change script with the first live update (Arabic's default is
  // Arabic-Indic digits; README "Languages").
  var numbers = null;
  try {
    numbers = new Intl.NumberFormat(document.documentElement.lang + "-u-nu-latn", { useGrouping: "always" });
  } catch (e) { numbers = null; }
  function number(n) { return numbers ? numbers.format(n) : String(n); }

  // Same rule as queueing/rules/wording.py (wait_kind): what stops the line comes before
  // any figure, and a figure before a bound. Pure.
  function waitKind(status, state, mode, eta, bound) {
    if (status === "prequeue") return "prequeue";
    if (mode === "maintenance") return "maintenance";
    if (state === "closed") return "closed";
    if (state === "paused") return "paused";
    if (eta) return "estimate";
    if (bound !== null && bound !== undefined) return "bounded";
    return "measuring";
  }

  // Same rule as queueing/rules/wording.py (status_kind), for a fan in line. Pure.
  function statusKind(status, state, mode, position) {
    if (status === "prequeue") return mode === "maintenance" ? "prequeueMaintenance" : "prequeue";
    if (mode === "maintenance") return "maintenance";
    if (state === "paused") return "paused";
    return position === 1 ? "next" : "inLine";
  }

  // Same maths as queueing/rules/eta.py (wait_bound): the longest a fan at `position` can
  // wait while a capacity-bound pace is still measured; null where the settings bound
  // nothing. `limits`: {rate (per minute), capacity, session (seconds)}. Pure.
  function waitBound(position, limits) {
    var TURNOVER = 2.0;  // SESSION_TURNOVER_SECONDS
    if (!limits || !position || position < 1 || !limits.session || !limits.capacity) return null;
    var rate = limits.rate, capacity = limits.capacity, session = limits.session;
    // capacity_may_bind
    if (rate && !(capacity < rate / 60.0 * session)) return null;
    var wave = session + TURNOVER;
    if (rate) wave += capacity / (rate / 60.0);
    return Math.ceil(position / capacity) * wave;
  }

  // Same wording as queueing/rules/wording.py (wait_text).
  function waitText(kind, eta, bound) {
    if (kind === "estimate") return rangeText(eta);
    if (kind === "bounded") return boundText(bound);
    return S["wait:" + kind];
  }

  function boundText(bound) {
    var minutes = Math.max(1, Math.ceil(bound / 60));
    if (minutes >= 120) {
      var hours = Math.ceil(bound / 3600);
      return fmt(ngettext("At most %(n)d hour (still measuring how fast the line moves).",
        "At most %(n)d hours (still measuring how fast the line moves).", hours), { n: hours });
    }
    return fmt(ngettext("At most %(n)d minute (still measuring how fast the line moves).",
      "At most %(n)d minutes (still measuring how fast the line moves).", minutes), { n: minutes });
  }

  // Same wording as queueing/rules/wording.py (others_waiting_text).
  function othersText(queueLength) {
    var others = Math.max(0, (queueLength || 0) - 1);
    if (!others) return S.nobodyElse;
    return fmt(ngettext("%(n)s other person is waiting with you.",
      "%(n)s other people are waiting with you.", others), { n: number(others) });
  }

  function rangeText(eta) {
    var lo = Math.floor(eta.p10 / 60), hi = Math.ceil(eta.p90 / 60);
    if (hi <= 1) return S.lessThanMinute;
    if (hi >= 120) {
      var loH = Math.max(1, Math.round(eta.p10 / 3600));
      var hiH = Math.max(loH, Math.round(eta.p90 / 3600));
      if (loH === hiH) return fmt(ngettext("about %(n)d hour", "about %(n)d hours", loH), { n: loH });
      return fmt(S.hoursRange, { low: loH, high: hiH });
    }
    lo = Math.max(1, lo);
    if (lo >= hi) return fmt(ngettext("about %(n)d minute", "about %(n)d minutes", hi), { n: hi });
    return fmt(S.minutesRange, { low: lo, high: hi });
  }

  // Same maths as queueing/rules/eta.py (estimate_wait): p10/p50/p90 for position k.
  function estimate(position, throughput, tierId) {
    // Inside: the early return above hands this over before any top-level var is set.
    var Z90 = 1.2815515655446004, TICK_SD = 0.5;
    if (!throughput || throughput.ranged || !(throughput.lam > 0) || !position) return null;
    var tierLam = throughput.tiers && throughput.tiers[String(tierId)];
    var lam = tierLam || throughput.lam, scv = throughput.scv;
    var mean = position / lam;
    var err = (throughput.err || 0) * mean;
    var sd = Math.sqrt(position * scv / (lam * lam) + err * err + TICK_SD * TICK_SD);
    return { p10: Math.max(0, mean - Z90 * sd), p50: mean, p90: mean + Z90 * sd };
  }

  // Rank of our order key in a tier from its checkpoints; null if we are no longer in it.
  function rankIn(checkpoints, key) {
    if (!checkpoints.length || key < checkpoints[0][1]) return null;
    var lo = 0, hi = checkpoints.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (checkpoints[mid][1] <= key) lo = mid; else hi = mid - 1;
    }
    var r0 = checkpoints[lo][0], k0 = checkpoints[lo][1];
    if (k0 === key) return r0;
    // Past the last fan, or between two neighbours: we are not in this tier's line (any
    // more, or not yet in this tick): ask the server.
    if (lo === checkpoints.length - 1) return null;
    var r1 = checkpoints[lo + 1][0], k1 = checkpoints[lo + 1][1];
    if (r1 - r0 === 1) return null;
    var guess = Math.round(r0 + (key - k0) / (k1 - k0) * (r1 - r0));
    return Math.min(r1 - 1, Math.max(r0 + 1, guess));
  }

  // Same rule as queueing/rules/layout.py (position_in_line): 1-based position of the fan
  // ranked `rank` (0 = first) in tier `tierId`, given `tiers` ([{id, share}], service order)
  // and `counts` ({tier id: fans waiting}). Strict tiers alone, consecutive weighted tiers as
  // one group sharing by weight. Pure; null if `tierId` is not one of `tiers`.
  function positionInLine(tiers, tierId, rank, counts) {
    var groups = [];
    tiers.forEach(function (t) {
      var last = groups[groups.length - 1];
      if (t.share && last && last[0].share) last.push(t); else groups.push([t]);
    });
    var ahead = 0;
    for (var g = 0; g < groups.length; g++) {
      var mine = null;
      groups[g].forEach(function (t) { if (t.id === tierId) mine = t; });
      if (!mine) {
        groups[g].forEach(function (t) { ahead += counts[t.id] || 0; });
        continue;
      }
      ahead += rank;
      groups[g].forEach(function (t) {
        if (t.id !== tierId) ahead += Math.min(counts[t.id] || 0, Math.floor(rank * t.share / mine.share));
      });
      return ahead + 1;
    }
    return null;
  }

  function positionFrom(tick) {
    var counts = {}, mineInTick = null;
    tick.tiers.forEach(function (t) { counts[t.id] = t.count; if (t.id === me.tierId) mineInTick = t; });
    if (!mineInTick || me.orderKey === null) return null;
    var rank = rankIn(mineInTick.checkpoints, me.orderKey);
    if (rank === null) return null;
    return positionInLine(me.tiers, me.tierId, rank, counts);
  }

  // The sale started while this page showed the pre-queue: it becomes the waiting page where
  // it is, rather than every pre-queue page reloading at once.
  function becomeWaiting() {
    $("prequeue-part").hidden = true;
    $("waiting-part").hidden = false;
    status = "waiting";
    $("live").setAttribute("data-status", status);
    firstPosition = null;  // the progress bar starts from the first place shown
  }

  // `view.placed`: from the socket's snapshot, which brings the shuffled place's order key.
  function render(view) {
    if (view.status !== status) {
      var started = status === "prequeue" && view.status === "waiting";
      // A poll knows neither the order key the ticks are read by nor the sale's state: with
      // a socket open, the snapshot on its way places the page; without one, it reloads.
      if (started && !view.placed && socketOpen()) return;
      if (!started || !view.placed) { window.location.reload(); return; }
      becomeWaiting();
    }
    if (status === "prequeue") {
      showStatus(null);
      if (view.queueLength !== undefined && $("others-waiting")) {
        $("others-waiting").textContent = othersText(view.queueLength);
      }
    }
    if (status === "waiting" && view.position) {
      showStatus(view.position);
      $("position").textContent = number(view.position);
      // Paused: nobody knows when staff resume, so no wait is shown (as the server says).
      var eta = live.state === "paused" ? null : view.eta;
      var bound = cfg.boundApplies ? waitBound(view.position, live.limits) : null;
      var kind = waitKind(status, live.state, live.mode, eta, bound);
      $("wait").textContent = waitText(kind, eta, bound);
      $("wait").setAttribute("data-kind", kind);
      $("queue-length").textContent = number(view.queueLength);
      if (!firstPosition || view.position > firstPosition) {
        firstPosition = view.position;
        firstRemember(firstPosition);
      }
      var progress = Math.max(0, Math.min(100, Math.floor(100 * (firstPosition - view.position) / firstPosition)));
      $("progress-bar").style.width = progress + "%";
      document.querySelector(".progress").setAttribute("aria-valuenow", progress);
    }
  }

  // The page's first line, from what the line is doing now (the server's status_kind).
  var shownPosition = cfg.position;
  function showStatus(position) {
    if (position) shownPosition = position;
    $("status-text").textContent = S["status:" + statusKind(status, live.state, live.mode, shownPosition)];
  }

  var leaving = false;
  function goTo(url) {
    if (leaving) return;
    // A fan sent by a shop's Queue-it connector goes back through the room, which hands
    // over the connector's token instead of the pass (queueing/web/queueit.py).
    if (cfg.handoverUrl) url = cfg.handoverUrl;
    leaving = true;  // let in: no more polls, ticks or reconnects
    clearTimeout(pollTimer);
    if (socket) { socket.onclose = null; socket.close(); }
    $("status-text").textContent = S.admitted;
    if ($("wait")) $("wait").textContent = S.waitNow;
    // In a background tab your_turn.js holds the page and calls the fan back.
    if (window.wrYourTurn && window.wrYourTurn.arrive(url)) return;
    window.location.assign(url);
  }

  // Ask the server about this ticket: when the tick no longer shows us, or when polling.
  function check(thenSchedule) {
    if (checking) return;
    checking = true;
    fetch(cfg.ticketApi, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          if (afterPollRefused(response.status).action === "reload") {
            leaving = true;  // no more polls: the server's page says what happened
            window.location.reload();
            throw { stop: true };
          }
          // Busy or briefly unavailable: back off as told, keep the page and the place.
          var wait = parseFloat(response.headers.get("Retry-After")) || 5;
          throw { retry: Math.min(wait, cfg.pollAfter) * (1 + Math.random()) };
        }
        var after = parseFloat(response.headers.get("X-Poll-After-Seconds")) || cfg.pollAfter;
        return response.json().then(function (body) { return { body: body, after: after }; });
      })
      .then(function (r) {
        checking = false;
        if (r.body.redirect_url) { goTo(r.body.redirect_url); return; }
        if (r.body.sold_out_at) { soldOut(r.body.sold_out_message); return; }
        if ("message" in r.body) showMessage(r.body.message);
        render({ status: r.body.status, position: r.body.position, eta: r.body.eta,
                 queueLength: r.body.queue_length });
        if (thenSchedule) schedulePoll(r.after);
      })
      .catch(function (error) {
        checking = false;
        if (error && error.stop) return;
        if (thenSchedule || !socketOpen()) schedulePoll((error && error.retry) || cfg.pollAfter);
      });
  }

  function schedulePoll(seconds) {
    clearTimeout(pollTimer);
    if (leaving) return;
    if (socketOpen()) return;  // the socket keeps the place
    pollTimer = setTimeout(function () { check(true); }, Math.max(1, seconds) * 1000);
  }

  // Staff's word to the line, from a tick or a poll: set as text (never markup) in the
  // page's live region, which screen readers announce.
  function showMessage(message) {
    var body = $("staff-message-body");
    if (!body) return;
    if (body.textContent !== (message || "")) body.textContent = message || "";
    $("staff-message-text").hidden = !message;
  }

  // What the line is doing (state, mode: maintenance is said in the page's first line and its
  // wait) and staff's word, live: they come with every tick. The place is kept whatever the
  // mode. Whether the tick is newer than the page: see onTick.
  function takeTick(tick) {
    if (!tick || !("mode" in tick)) return false;
    // A tick built before this page was served knows less than the page: a new page's
    // snapshot carries the last tick, which may predate staff's latest word (its broadcast
    // is on its way). The page's own, rendered from the on-sale, stands until a newer tick.
    if (tick.at && cfg.serverNow && tick.at < cfg.serverNow) return false;
    if (tick.sold_out_at) { soldOut(tick.sold_out_message); return false; }
    live.state = tick.state;
    live.mode = tick.mode;
    if (tick.limits) live.limits = tick.limits;
    showMessage(tick.message);
    return true;
  }

  // The shop sold out (a tick or a poll says so): the page says "Sold out" with staff's word,
  // in place, and stops following the line, which the room sends home (the server's page
  // says the same on a reload). A fan already let in went to the shop before this.
  function soldOut(message) {
    if (leaving) return;
    leaving = true;  // no more polls, ticks or reconnects
    clearTimeout(pollTimer);
    if (socket) { socket.onclose = null; socket.close(); }
    status = "sold_out";
    $("live").setAttribute("data-status", status);
    ["prequeue-part", "waiting-part", "line-tools", "offline"].forEach(function (id) {
      if ($(id)) $(id).hidden = true;
    });
    $("status-text").textContent = S.soldOut;
    $("sold-out-message").textContent = message || "";
    $("sold-out-message").hidden = !message;
    $("sold-out-part").hidden = false;
  }

  function onTick(tick) {
    if (leaving) return;
    var fresh = takeTick(tick);
    if (status === "prequeue") {
      if (fresh) render({ status: "prequeue", queueLength: tick.queue_length });
      return;
    }
    if (status !== "waiting") return;
    var position = positionFrom(tick);
    if (position === null) { check(false); return; }  // admitted, or moved: ask once
    render({ status: "waiting", position: position, queueLength: tick.queue_length,
             eta: estimate(position, tick.throughput, me.tierId) });
  }

  function socketOpen() { return socket !== null && socket.readyState === 1; }

  // What the page does when a poll of its ticket is refused (docs/api.md). Pure.
  //   reload:   the place moved to another device (410 place_moved): this ticket is spent,
  //             and the server's page says so
  //   retry:    anything else (busy, briefly unavailable): back off, keep the place
  function afterPollRefused(status) {
    if (status === 410) return { action: "reload" };
    return { action: "retry" };
  }

  // What the page does when the server closes its socket (docs/api.md lists the codes). Pure.
  //   reload:   the ticket is not valid here (4401) or is gone (4404), or the place moved to
  //             another device (4410): the server's page says what happened
  //   stop:     a newer page took this ticket's socket (4409): say so, never reconnect, but
  //             keep polling: if that page dies, the polls still keep the place alive
  //   poll:     this address holds too many sockets (4429): poll, try a socket much later
  //   retry:    anything else (1013, a network drop): poll meanwhile, reconnect soon
  function afterClose(code) {
    if (code === 4401 || code === 4404 || code === 4410) return { action: "reload" };
    if (code === 4409) return { action: "stop" };
    if (code === 4429) return { action: "poll", reconnectAfter: [60, 120] };
    return { action: "retry", reconnectAfter: [5, 10] };
  }

  function stop(detail) {
    stopped = true;
    // The server's sentence, in the page's language; then what the fan can do about it.
    $("offline").textContent = (S.replaced || detail) + " " + S.replacedHint;
    $("offline").hidden = false;
    // No socket again (it would take the socket back and the pages would take turns), but
    // polls hold no socket: they keep the ticket alive should the newer page go away.
    schedulePoll(cfg.pollAfter);
  }

  function connect() {
    if (!("WebSocket" in window)) { schedulePoll(cfg.pollAfter); return; }
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var replacedDetail = null;
    socket = new WebSocket(scheme + window.location.host + cfg.wsPath + "?ticket=" + encodeURIComponent(cfg.ticket));
    socket.onopen = function () {
      clearTimeout(pollTimer);
      pollTimer = null;
      $("offline").hidden = true;
    };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      if (message.type === "snapshot") {
        me.tierId = message.tier_id; me.orderKey = message.order_key; me.tiers = message.tiers;
        if (message.redirect_url) { goTo(message.redirect_url); return; }
        takeTick(message.tick);
        if (leaving) return;  // the tick said the sale sold out
        render({ status: message.status, position: message.position, eta: message.eta,
                 queueLength: message.queue_length, placed: true });
      } else if (message.type === "tick") {
        onTick(message);
      } else if (message.type === "admitted" && message.redirect_url) {
        goTo(message.redirect_url);
      } else if (message.type === "replaced") {
        replacedDetail = message.detail;
      }
    };
    socket.onclose = function (event) {
      var next = afterClose(event.code);
      if (next.action === "reload") { window.location.reload(); return; }
      if (next.action === "stop") { stop(replacedDetail); return; }
      $("offline").textContent = S.offline;
      $("offline").hidden = false;
      schedulePoll(Math.min(cfg.pollAfter, 5));  // polling keeps the place alive meanwhile
      var wait = next.reconnectAfter;
      setTimeout(connect, (wait[0] + Math.random() * (wait[1] - wait[0])) * 1000);
    };
  }

  // The server's clock, as the page was rendered, moved on by the fan's: a phone whose clock
  // is minutes off would otherwise count down to the wrong moment (and reload too early).
  var clockOffset = cfg.serverNow ? cfg.serverNow - Date.now() / 1000 : 0;
  function serverNow() { return Date.now() / 1000 + clockOffset; }

  function countdown() {
    var node = $("countdown");
    if (!node || !cfg.startsAt) return;
    var left = Math.max(0, Math.round(cfg.startsAt - serverNow()));
    var d = Math.floor(left / 86400), h = Math.floor(left % 86400 / 3600);
    var m = Math.floor(left % 3600 / 60), s = left % 60;
    node.textContent = d ? fmt(S.countdownDays, { d: d, h: h, m: m, s: s }) : fmt(S.countdown, { h: h, m: m, s: s });
    if (left === 0) {
      // Once the line has started, the server sends an open socket this page's shuffled
      // place (a new snapshot, within seconds) and the page becomes a waiting page in place.
      // A page without a socket 2-5 s after the countdown ran out reloads; so does one still
      // in the pre-queue 20-30 s after that. (Decided then, not now: a page loaded at the
      // start runs its countdown before its socket opens.)
      var stillWaiting = function () { return !stopped && status === "prequeue"; };
      setTimeout(function () {
        if (!stillWaiting()) return;
        if (!socketOpen()) { window.location.reload(); return; }
        setTimeout(function () {
          if (stillWaiting()) window.location.reload();
        }, 20000 + Math.random() * 10000);
      }, 2000 + Math.random() * 3000);
    }
    else setTimeout(countdown, 1000);
  }

  countdown();
  connect();
})();
