import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';

// The committed document is what GET /openapi.json serves (test/worker/openapi.test.ts compares
// them); here it is checked against the OpenAPI 3.1 schema by a validator of its own, and against
// the code (stale when a route's schema changed without `npm run openapi`).
const document = JSON.parse(readFileSync('docs/openapi.json', 'utf8')) as { openapi: string; paths: Record<string, unknown> };

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const result = await new Validator().validate(document as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
  });

  it('and the client types generated from it are what the code declares now (npm run openapi -- --check)', () => {
    const run = () => execFileSync('npm', ['run', '--silent', 'openapi', '--', '--check'], { encoding: 'utf8', stdio: 'pipe' });
    expect(run).not.toThrow();
  }, 120_000);
});
