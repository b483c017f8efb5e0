import { allProviders } from '../sandbox/providers.ts';
import { startSandbox } from '../sandbox/server.ts';

// Standalone sandbox (the dev stack starts it in-process): `npm run sandbox`, PORT to choose.
const sandbox = await startSandbox({ port: Number(process.env.SANDBOX_PORT ?? 8788), providers: allProviders() });
console.log(`sandbox listening on ${sandbox.url}`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void sandbox.close().then(() => process.exit(0)));
