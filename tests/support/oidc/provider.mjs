// The OpenID provider of the tests: the certified `oidc-provider` package, configured with
// the clients the tests use, on a loopback port. Started by tests/support/oidc_provider.py
// (which installs the package into ~/.cache/toolproxy/npm/ with `npm ci` and copies this
// script beside it). Prints one JSON line {"issuer": ...} on stdout once it listens.
//
// Clients (secrets are test values):
//   agent-rs / agent-es   client credentials; JWT access tokens signed RS256 / ES256; the
//                         token carries team "t-provider" and role "agent" (extraTokenClaims)
//   agent-gov             client credentials, role "governance"
//   agent-noteam          client credentials, no team claim (a token the proxy must refuse)
//   upstream-bridge       client credentials: Toolproxy's upstream bridge calling an upstream
//   console               authorization code + PKCE (a native client: any loopback port)
// Accounts (the dev login page takes any password): gov-alice (governance), admin-bob
// (admin), agent-carol (agent), all of team "t-console".
//
// Test controls (loopback only, for the fixture): POST /__test/rotate makes new RS256 and
// ES256 keys the signing ones (the old stay published); POST /__test/retire drops every key
// but the newest pair from the JWKS; POST /__test/grants counts the tokens issued per client.
import http from 'node:http';
import * as jose from 'jose';
import Provider from 'oidc-provider';

const host = '127.0.0.1';
const requestedPort = Number(process.env.OIDC_PORT || 0);
const SCOPES = (process.env.OIDC_RESOURCE_SCOPES
  || 'mcp tool.math.invoke tool.text.invoke tool.memory.invoke').split(' ');
const CC_CLIENTS = {
  'agent-rs': { alg: 'RS256', team: 't-provider', role: 'agent' },
  'agent-es': { alg: 'ES256', team: 't-provider', role: 'agent' },
  'agent-gov': { alg: 'ES256', team: 't-provider', role: 'governance' },
  'agent-noteam': { alg: 'ES256', role: 'agent' },
  'upstream-bridge': { alg: 'RS256' },  // Toolproxy's bridge, as an upstream's client
};
const grants = {};  // client_id -> tokens issued (POST /__test/grants reads them)
const ACCOUNTS = {
  'gov-alice': { team: 't-console', role: 'governance' },
  'admin-bob': { team: 't-console', role: 'admin' },
  'agent-carol': { team: 't-console', role: 'agent' },
};

async function newKeys() {
  const out = [];
  for (const alg of ['RS256', 'ES256']) {
    const { privateKey } = await jose.generateKeyPair(alg, { extractable: true });
    const jwk = await jose.exportJWK(privateKey);
    out.push({ ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${crypto.randomUUID().slice(0, 8)}` });
  }
  return out;
}

let keys = await newKeys();

function configuration() {
  return {
    clients: [
      ...Object.entries(CC_CLIENTS).map(([id]) => ({
        client_id: id,
        client_secret: `${id}-secret`,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: SCOPES.join(' '),
      })),
      {
        client_id: 'console',
        client_secret: 'console-secret',
        application_type: 'native',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: ['http://127.0.0.1/console/signin/callback'],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys },
    claims: { openid: ['sub'], toolproxy: ['team', 'role'] },
    scopes: ['openid', 'toolproxy', ...SCOPES],
    conformIdTokenClaims: false,
    async findAccount(ctx, id) {
      const account = ACCOUNTS[id];
      if (!account) return undefined;
      return { accountId: id, async claims() { return { sub: id, ...account }; } };
    },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (ctx, client, oneOf) => oneOf || process.env.OIDC_DEFAULT_RESOURCE || undefined,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resourceIndicator, client) => ({
          scope: SCOPES.join(' '),
          audience: resourceIndicator,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: (CC_CLIENTS[client.clientId] || { alg: 'ES256' }).alg } },
        }),
      },
    },
    async extraTokenClaims(ctx, token) {
      const known = CC_CLIENTS[token.clientId];
      if (known) {
        const { alg, ...claims } = known;
        return claims;
      }
      return ACCOUNTS[token.accountId];
    },
    pkce: { required: () => true },
    ttl: { AccessToken: 600, ClientCredentials: 600, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
    cookies: { keys: ['test-cookie-key-not-secret'] },
  };
}

let issuer = '';
let provider = null;

function build() {
  provider = new Provider(issuer, configuration());
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  provider.on('grant.success', (ctx) => {
    const id = ctx.oidc.client && ctx.oidc.client.clientId;
    if (id) grants[id] = (grants[id] || 0) + 1;
  });
  return provider.callback();
}

let handle = null;
const server = http.createServer(async (req, res) => {
  if (req.method === 'POST' && req.url === '/__test/rotate') {
    keys = [...(await newKeys()), ...keys];
    handle = build();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kids: keys.map((k) => k.kid) }));
    return;
  }
  if (req.method === 'POST' && req.url === '/__test/retire') {
    keys = keys.slice(0, 2);
    handle = build();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kids: keys.map((k) => k.kid) }));
    return;
  }
  if (req.method === 'POST' && req.url === '/__test/grants') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ grants }));
    return;
  }
  handle(req, res);
});

server.listen(requestedPort, host, () => {
  issuer = `http://${host}:${server.address().port}`;
  handle = build();
  process.stdout.write(`${JSON.stringify({ issuer, kids: keys.map((k) => k.kid) })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
