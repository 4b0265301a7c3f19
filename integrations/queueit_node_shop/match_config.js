// Which action of an integration config Queue-it's own connector takes for each request: the
// room's tests (tests/queueing/rules/test_queueit_config.py) feed it the config the room serves
// and compare with the room's own traffic rules. Reads JSON on stdin:
//   {"customerId", "secretKey", "config": <integration config>, "requests": [
//     {"url", "headers": {name: value}, "cookies": {name: value}, "userAgent"}]}
// and writes the list of actions ("Ignore" or "Queue"; "" when nothing matched) on stdout.
"use strict";

const crypto = require("crypto");
const { KnownUser } = require("@queue-it/connector-javascript");

function context(request) {
  const headers = {};
  for (const [name, value] of Object.entries(request.headers || {})) {
    headers[name.toLowerCase()] = value;
  }
  return {
    getHttpRequest: () => ({
      getUserAgent: () => request.userAgent || "",
      getHeader: (name) => headers[String(name).toLowerCase()] || "",
      getAbsoluteUri: () => request.url,
      getUserHostAddress: () => "127.0.0.1",
      getCookieValue: (name) => (request.cookies || {})[name],
      getRequestBodyAsString: () => "",
    }),
    getHttpResponse: () => ({ setCookie: () => {} }),
    getCryptoProvider: () => ({
      getSha256Hash: (key, text) => crypto.createHmac("sha256", key).update(text).digest("hex"),
    }),
    getEnqueueTokenProvider: () => null,
  };
}

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const job = JSON.parse(input);
  const config = JSON.stringify(job.config);
  const actions = [];
  for (const request of job.requests) {
    const result = await KnownUser.validateRequestByIntegrationConfig(
      request.url,
      "",
      config,
      job.customerId,
      job.secretKey,
      context(request),
      null,
    );
    actions.push(result.actionType || "");
  }
  process.stdout.write(JSON.stringify(actions));
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
