// A small shop protected by Queue-it's own Node connector (@queue-it/connector-javascript,
// unmodified, from npm), wired as the connector's README shows, with its queue domain pointed
// at the waiting room. The room's tests (tests/test_queueit_connector.py) run it to prove the
// room's Queue-it surface end to end; docs/queueit.md walks through it.
//
// Configuration, from the environment (only what a Queue-it shop configures):
//   QUEUEIT_CUSTOMER_ID, QUEUEIT_SECRET_KEY, QUEUEIT_EVENT_ID, QUEUEIT_QUEUE_DOMAIN
//   (host[:port][/path] of the room; the connector always adds https://), SHOP_PORT,
//   SHOP_HOST (default 127.0.0.1), QUEUEIT_COOKIE_VALIDITY_MINUTES (default 20),
//   QUEUEIT_ENQUEUE_TOKEN=1 to send enqueue tokens (Queue-it's DefaultEnqueueTokenProvider,
//   as a shop with token-protected waiting rooms wires it).
//
// Pages: every path is protected, except
//   /healthz      plain 200, for whoever starts the shop
//   /cancel       the cancel action (as an order-confirmation page would call it)
// A protected page answers 200 JSON {path, queueId, redirectType} once the connector lets
// the request through.
"use strict";

const crypto = require("crypto");
const http = require("http");
const {
  KnownUser,
  QueueEventConfig,
  CancelEventConfig,
  DefaultEnqueueTokenProvider,
} = require("@queue-it/connector-javascript");
const { Token, Payload } = require("@queue-it/queue-token");

const customerId = process.env.QUEUEIT_CUSTOMER_ID;
const secretKey = process.env.QUEUEIT_SECRET_KEY;
const eventId = process.env.QUEUEIT_EVENT_ID;
const queueDomain = process.env.QUEUEIT_QUEUE_DOMAIN;
const port = Number(process.env.SHOP_PORT || 8080);
const host = process.env.SHOP_HOST || "127.0.0.1";
const cookieMinutes = Number(process.env.QUEUEIT_COOKIE_VALIDITY_MINUTES || 20);
const enqueueTokens = process.env.QUEUEIT_ENQUEUE_TOKEN === "1";

function queueConfig() {
  const config = new QueueEventConfig();
  config.eventId = eventId;
  config.queueDomain = queueDomain;
  config.cookieDomain = "";
  config.isCookieHttpOnly = true;
  config.isCookieSecure = false; // the shop itself is plain HTTP in the tests
  config.cookieValidityMinute = cookieMinutes;
  config.extendCookieValidity = true;
  config.culture = process.env.QUEUEIT_CULTURE || "";
  config.layoutName = "";
  return config;
}

function cancelConfig() {
  const config = new CancelEventConfig();
  config.waitingRoomIds = [eventId];
  config.queueDomain = queueDomain;
  config.cookieDomain = "";
  config.isCookieHttpOnly = true;
  config.isCookieSecure = false;
  return config;
}

function parseCookies(header) {
  const cookies = {};
  for (const part of (header || "").split(";")) {
    const at = part.indexOf("=");
    if (at < 0) continue;
    const name = part.slice(0, at).trim();
    if (!(name in cookies)) cookies[name] = part.slice(at + 1).trim();
  }
  return cookies;
}

// The connector does no I/O of its own: the shop hands it the request, the response's
// cookies and HMAC-SHA256 (the README's context provider).
function contextProvider(req, setCookies) {
  const cookies = parseCookies(req.headers.cookie);
  return {
    getHttpRequest() {
      return {
        getUserAgent: () => req.headers["user-agent"] || "",
        getHeader: (name) => {
          const value = req.headers[String(name).toLowerCase()];
          return value === undefined ? "" : String(value);
        },
        getAbsoluteUri: () => `http://${req.headers.host}${req.url}`,
        getUserHostAddress: () => req.socket.remoteAddress || "",
        getCookieValue: (name) => {
          const value = cookies[name];
          if (value === undefined) return undefined;
          try {
            return decodeURIComponent(value);
          } catch (_) {
            return undefined;
          }
        },
        getRequestBodyAsString: () => "",
      };
    },
    getHttpResponse() {
      return {
        setCookie(name, value, domain, expiration, isHttpOnly, isSecure) {
          let line = `${name}=${encodeURIComponent(value)}; Path=/`;
          line += `; Expires=${new Date(expiration * 1000).toUTCString()}`;
          if (domain) line += `; Domain=${domain}`;
          if (isHttpOnly) line += "; HttpOnly";
          if (isSecure) line += "; Secure";
          line += "; SameSite=Lax";
          setCookies.push(line);
        },
      };
    },
    getCryptoProvider() {
      return {
        getSha256Hash: (key, text) =>
          crypto.createHmac("sha256", key).update(text).digest("hex"),
      };
    },
    getEnqueueTokenProvider() {
      if (!enqueueTokens) return null;
      // A token valid for a minute, bound to the client's address, as Queue-it's README has it.
      return new DefaultEnqueueTokenProvider(
        customerId,
        secretKey,
        60000,
        req.socket.remoteAddress || null,
        false,
        Token,
        Payload,
      );
    },
  };
}

// The README's helpers: the token's parameter taken out of the URL the connector checks.
const TOKEN_PATTERN = /([?&])(queueittoken=[^&]*)/i;

function withoutToken(url) {
  return url.replace(TOKEN_PATTERN, "$1").replace(/[?&]$/, "").replace("?&", "?");
}

function tokenOf(url) {
  const found = new URL(url, "http://shop").searchParams.get("queueittoken");
  return found || "";
}

function noCache(res) {
  res.setHeader("Cache-Control", "no-cache, no-store, must-revalidate, max-age=0");
  res.setHeader("Pragma", "no-cache");
  res.setHeader("Expires", "Fri, 01 Jan 1990 00:00:00 GMT");
}

function answer(res, status, headers, body, setCookies) {
  if (setCookies.length) res.setHeader("Set-Cookie", setCookies);
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  if (body === undefined) {
    res.writeHead(status);
    res.end();
    return;
  }
  res.setHeader("Content-Type", "application/json");
  res.writeHead(status);
  res.end(JSON.stringify(body));
}

async function protectedPage(req, res) {
  const setCookies = [];
  const ctx = contextProvider(req, setCookies);
  const url = `http://${req.headers.host}${req.url}`;
  const result = await KnownUser.resolveQueueRequestByLocalConfig(
    withoutToken(url),
    tokenOf(url),
    queueConfig(),
    customerId,
    secretKey,
    ctx,
    null,
  );
  if (result.doRedirect()) {
    noCache(res);
    if (result.isAjaxResult) {
      // The README's AJAX answer: Queue-it's client script navigates the page there.
      const headerName = result.getAjaxQueueRedirectHeaderKey();
      answer(
        res,
        200,
        {
          [headerName]: result.getAjaxRedirectUrl(),
          "Access-Control-Expose-Headers": headerName,
        },
        undefined,
        setCookies,
      );
      return;
    }
    answer(res, 302, { Location: result.redirectUrl }, undefined, setCookies);
    return;
  }
  if (tokenOf(url) && result.actionType === "Queue") {
    // Let in on the token: the cookie is set, and the URL is asked again without the token
    // (so it is neither shared nor bookmarked), as the README does.
    noCache(res);
    answer(res, 302, { Location: withoutToken(url) }, undefined, setCookies);
    return;
  }
  answer(
    res,
    200,
    {},
    {
      path: req.url,
      queueId: result.queueId || null,
      redirectType: result.redirectType || null,
    },
    setCookies,
  );
}

function cancelPage(req, res) {
  const setCookies = [];
  const ctx = contextProvider(req, setCookies);
  const url = `http://${req.headers.host}${req.url}`;
  const result = KnownUser.cancelRequestByLocalConfig(
    withoutToken(url),
    tokenOf(url),
    cancelConfig(),
    customerId,
    secretKey,
    ctx,
  );
  if (result.doRedirect()) {
    noCache(res);
    answer(res, 302, { Location: result.redirectUrl }, undefined, setCookies);
    return;
  }
  answer(res, 200, {}, { path: req.url, cancelled: true }, setCookies);
}

const server = http.createServer((req, res) => {
  const path = req.url.split("?")[0];
  let work;
  if (path === "/healthz") {
    work = Promise.resolve(answer(res, 200, {}, { ok: true }, []));
  } else if (path === "/cancel") {
    work = Promise.resolve().then(() => cancelPage(req, res));
  } else {
    work = protectedPage(req, res);
  }
  work.catch((error) => {
    // The README lets the request through when the connector throws ("fail open"); this
    // shop says so in its answer, so that a test can never mistake it for a pass.
    answer(res, 200, {}, { path: req.url, connectorError: String(error) }, []);
  });
});

server.listen(port, host, () => {
  process.stdout.write(`shop listening on http://${host}:${port}\n`);
});
