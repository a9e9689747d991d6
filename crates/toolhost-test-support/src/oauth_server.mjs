// A real authorization server (oidc-provider, OpenID Certified) and an MCP
// server that accepts only its tokens, for the tests of toolhost's OAuth
// client. Run by `oauth_server.rs` with the Node 22 and node_modules of the
// conformance suite's install (argv[2]); prints `listening URL` first, then
// one line per grant (`grant authorization_code`, `grant refresh_token`).
//
// The authorization server: dynamic registration, PKCE, resource
// indicators (opaque access tokens for `BASE/mcp` lasting ACCESS_TTL
// seconds), refresh tokens, and an interaction that signs in `alice` and
// consents to what is asked (the "person" is scripted).
// The MCP server: protected resource metadata, 401 with
// `WWW-Authenticate: Bearer resource_metadata=…`, and a `whoami` tool.

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import http from 'node:http';

const modules = process.argv[2];
const ACCESS_TTL = Number(process.argv[3] || '4');
const require = createRequire(modules + '/');
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);

const { default: Provider } = await load('oidc-provider');
const { default: express } = await load('express');
const { Server } = await load('@modelcontextprotocol/sdk/server/index.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { requireBearerAuth } = await load('@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js');
const { InvalidTokenError } = await load('@modelcontextprotocol/sdk/server/auth/errors.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = await load('@modelcontextprotocol/sdk/types.js');

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;
const resource = `${base}/mcp`;

const provider = new Provider(base, {
  clients: [],
  scopes: ['openid', 'offline_access', 'mcp'],
  cookies: { keys: ['toolhost-test'] },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => {
        if (indicator !== resource) throw new Error(`unknown resource ${indicator}`);
        return { scope: 'mcp', audience: resource, accessTokenTTL: ACCESS_TTL, accessTokenFormat: 'opaque' };
      },
    },
  },
  // A refresh token for every client that may use one (not only with
  // `prompt=consent`, which OIDC asks of `offline_access`).
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
});
provider.on('grant.success', (ctx) => console.log(`grant ${ctx.oidc.params.grant_type}`));
provider.on('server_error', (ctx, err) => console.error('server_error', err));

const app = express();

// The scripted person: signs in as alice and consents to what is asked.
app.get('/interaction/:uid', async (req, res, next) => {
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: 'alice' } }, { mergeWithLastSubmission: false });
      return;
    }
    const missing = details.prompt.details;
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: details.grantId ? {} : { grantId } }, { mergeWithLastSubmission: true });
  } catch (err) {
    next(err);
  }
});

app.get('/.well-known/oauth-protected-resource/mcp', (req, res) => {
  res.json({ resource, authorization_servers: [base], scopes_supported: ['mcp'] });
});

const verifier = {
  async verifyAccessToken(token) {
    const found = await provider.AccessToken.find(token);
    if (!found || found.aud !== resource) throw new InvalidTokenError('unknown or expired token');
    return { token, clientId: found.clientId, scopes: (found.scope || '').split(' '), expiresAt: found.exp, extra: { sub: found.accountId } };
  },
};

app.post('/mcp', express.json(), requireBearerAuth({
  verifier,
  requiredScopes: ['mcp'],
  resourceMetadataUrl: `${base}/.well-known/oauth-protected-resource/mcp`,
}), async (req, res) => {
  const mcp = new Server({ name: 'oauth-test-server', version: '1.0.0' }, { capabilities: { tools: {} } });
  mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'whoami', description: 'Who the token is for.', inputSchema: { type: 'object' } }],
  }));
  mcp.setRequestHandler(CallToolRequestSchema, async (request, extra) => ({
    content: [{ type: 'text', text: `hello ${extra.authInfo?.extra?.sub}` }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => { transport.close(); mcp.close(); });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, req.body);
});

app.use(provider.callback());
server.on('request', app);
console.log(`listening ${base}`);
