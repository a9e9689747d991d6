// A real authorization server for the tests: `oidc-provider` (npm, OpenID
// Certified), installed by `cargo xtask test` under target/tools/oidc/.
// Run as `node provider.mjs CONFIG.json` (the test writes the config, see
// `toolhost_test_support::oidc`); listens on a free loopback port and
// prints `listening on ISSUER` when ready.
//
// What it is set up for:
// - JWT access tokens (RS256) bound to one resource (RFC 8707): the MCP
//   server under test (`resource`, or any URL `resource_pattern`
//   matches), with its `scopes`; opaque ones for the clients the
//   config names in `opaque_clients` (checked through introspection);
// - dynamic client registration (RFC 7591), authorization code with PKCE,
//   client credentials, introspection (RFC 7662);
// - a scripted consent: an interaction signs in the account named by the
//   request's `login_hint` (else `subject`) and grants every scope and
//   resource asked for, with no page shown;
// - `groups` in access tokens, from the config's `groups` by account;
// - with `refresh_tokens: true`, a refresh token for every client allowed
//   the grant (not only for `offline_access` with `prompt=consent`);
// - one line `grant TYPE` on stdout per token issued, and one line
//   `request METHOD PATH` per request it is sent (after `listening`).
import { readFileSync } from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// The port first, so the issuer names it.
const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

const opaque = new Set(config.opaque_clients || []);
// The resource server: one URL, or any matching a pattern (a server that
// starts after the provider, on a port not known yet).
const isResource = (indicator) => indicator === config.resource
  || (config.resource_pattern !== undefined && new RegExp(config.resource_pattern).test(indicator));
const refresh = config.refresh_tokens
  ? { issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token') }
  : {};

const provider = new Provider(issuer, {
  ...refresh,
  clients: config.clients || [],
  ttl: {
    AccessToken: config.access_token_ttl || 300,
    ClientCredentials: config.access_token_ttl || 300,
    AuthorizationCode: 60,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
    RefreshToken: 3600,
  },
  jwks: { keys: [signing] },
  scopes: ['openid', 'offline_access', ...(config.scopes || [])],
  pkce: { required: () => true },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  extraTokenClaims: (ctx, token) => {
    const groups = (config.groups || {})[token.accountId || token.clientId];
    return groups ? { groups } : undefined;
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: () => true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx) => config.resource || ctx.oidc.params?.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator, client) => {
        if (!isResource(indicator)) {
          throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        }
        return {
          scope: (config.scopes || []).join(' '),
          audience: indicator,
          accessTokenTTL: config.access_token_ttl || 300,
          accessTokenFormat: opaque.has(client.clientId) ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});
provider.proxy = false;

// Every request, before anything answers it: what reached this server.
provider.use(async (ctx, next) => {
  console.log(`request ${ctx.method} ${ctx.path}`);
  return next();
});

// The scripted consent: whoever `login_hint` names signs in, and every
// scope and resource asked for is granted.
provider.use(async (ctx, next) => {
  if (!/^\/interaction\/[^/]+$/.test(ctx.path)) {
    return next();
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: params.login_hint || config.subject || 'alice' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
  ctx.status = 303;
  ctx.redirect(returnTo);
});

provider.on('server_error', (ctx, err) => console.error('server_error', err));
provider.on('grant.success', (ctx) => console.log(`grant ${ctx.oidc.params.grant_type}`));

server.on('request', provider.callback());
console.log(`listening on ${issuer}`);
