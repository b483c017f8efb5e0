import { allProviders } from '../sandbox/providers.ts';
import { startSandbox } from '../sandbox/server.ts';
import { parseCli } from './lib/cli.ts';

// Standalone sandbox (the dev stack starts it in-process): `npm run sandbox`, PORT to choose.
parseCli({
  command: 'npm run sandbox',
  usage: `usage: npm run sandbox
Serves the sandbox providers (Depot, DigitalOcean, Stripe, Spaces APIs) on 127.0.0.1 until
Ctrl-C; SANDBOX_PORT chooses the port (default 8788). \`npm start\` runs one itself.

  -h, --help  this help`,
});
const sandbox = await startSandbox({ port: Number(process.env.SANDBOX_PORT ?? 8788), providers: allProviders() });
console.log(`sandbox listening on ${sandbox.url}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void sandbox.close().then(() => process.exit(0)));
