// A real OpenID Connect provider for the room's staff sign-in tests
// (tests/dashboard/test_oidc_sign_in.py): panva's oidc-provider, as it comes, with its own
// development sign-in pages (any password) and a few users in groups. Never for production.
//
//   PORT=9400 CLIENT_ID=room CLIENT_SECRET=... REDIRECT_URI=http://127.0.0.1:8000/dashboard/oidc/callback/ \
//     node provider.mjs
//
// The issuer is http://127.0.0.1:$PORT; it prints "listening <issuer>" once it serves.
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;

// Who the provider knows, and the groups its groups claim says they are in.
const USERS = {
  alice: { name: 'Alice Control', email: 'alice@example.test', groups: ['room-staff'] },
  bob: { name: 'Bob Audit', email: 'bob@example.test', groups: ['room-auditors', 'finance'] },
  carol: { name: 'Carol Elsewhere', email: 'carol@example.test', groups: ['marketing'] },
};

// A signing key of this run's own: the room reads it from the provider's JWKS.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-run', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: process.env.CLIENT_ID,
      client_secret: process.env.CLIENT_SECRET,
      redirect_uris: process.env.REDIRECT_URI.split(','),
      grant_types: ['authorization_code'],
      response_types: ['code'],
      // mozilla-django-oidc sends the secret in the token request's body.
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  jwks: { keys: [signingKey] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  // PKCE for every client, confidential ones too: the room must send its challenge.
  pkce: { required: () => true },
  cookies: { keys: ['only-for-tests'] },
  async findAccount(ctx, id) {
    const user = USERS[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email_verified: true, ...user };
      },
    };
  },
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
