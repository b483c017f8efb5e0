import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';

/**
 * The Chromium the browser tests drive through playwright-core, found without anything installed
 * by hand:
 * - Debian's /usr/bin/chromium when it is there (the fast path: nothing to unpack);
 * - otherwise the headless Chromium that the npm package @sparticuz/chromium ships inside its
 *   tarball (brotli-compressed, with the NSS libraries and a font it needs), unpacked once into
 *   node_modules/.cache and run from there. Nothing is downloaded at install or at run time.
 *
 * STARBASE_TEST_BROWSER picks one: `system` (Debian's, an error when it is missing), `bundled`
 * (the package's, even when Debian's is installed: how to check a fresh machine's path), or unset
 * (Debian's when present, else the package's).
 */
export interface TestBrowser {
  /** Which one: Debian's or the package's. */
  source: 'system' | 'bundled';
  executablePath: string;
  /** The browser process's environment (the bundled one needs its own libraries and fonts). */
  env: Record<string, string>;
}

const SYSTEM_CHROMIUM = '/usr/bin/chromium';

export function testBrowser(): TestBrowser {
  const choice = process.env.STARBASE_TEST_BROWSER ?? '';
  if (!['', 'system', 'bundled'].includes(choice)) {
    throw new Error(`STARBASE_TEST_BROWSER must be "system", "bundled" or unset, not ${JSON.stringify(choice)}`);
  }
  if (choice === 'system' || (choice === '' && isExecutable(SYSTEM_CHROMIUM))) {
    if (!isExecutable(SYSTEM_CHROMIUM)) throw new Error(`STARBASE_TEST_BROWSER=system but ${SYSTEM_CHROMIUM} is not installed`);
    return { source: 'system', executablePath: SYSTEM_CHROMIUM, env: stringEnv() };
  }
  return bundledChromium();
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function stringEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
}

/**
 * Unpacks @sparticuz/chromium's browser into node_modules/.cache/starbase-chromium/<version>.
 * The package's own executablePath() would unpack into a fixed /tmp/chromium, which two test runs
 * on one machine write at the same time (and a half-written file passes its exists check); here
 * each run unpacks into its own folder and renames it into place, so a reader only ever sees a
 * complete one.
 */
function bundledChromium(): TestBrowser {
  const packageDir = join(dirname(createRequire(import.meta.url).resolve('@sparticuz/chromium')), '..');
  const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string };
  const nodeModules = join(packageDir, '..', '..');
  const dir = join(nodeModules, '.cache', 'starbase-chromium', version);
  if (!existsSync(join(dir, 'chromium'))) {
    const staging = `${dir}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging, { recursive: true });
    const bin = join(packageDir, 'bin');
    writeFileSync(join(staging, 'chromium'), brotliDecompressSync(readFileSync(join(bin, 'chromium.br'))), { mode: 0o755 });
    // al2023.tar.br: lib/ with libnss3, libnspr4 and libexpat (Debian's are not there without its chromium).
    extractTar(brotliDecompressSync(readFileSync(join(bin, 'al2023.tar.br'))), staging);
    // fonts.tar.br: fonts/ with Open Sans (its fonts.conf names Lambda's paths: ours is written below).
    extractTar(brotliDecompressSync(readFileSync(join(bin, 'fonts.tar.br'))), staging);
    writeFileSync(
      join(staging, 'fonts.conf'),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n` +
        `  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n` +
        `  <dir>${join(dir, 'fonts')}</dir>\n  <cachedir>${join(dir, 'fonts-cache')}</cachedir>\n</fontconfig>\n`,
    );
    try {
      renameSync(staging, dir);
    } catch (error) {
      // Another run renamed its copy first: use that one.
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(join(dir, 'chromium'))) throw error;
    }
  }
  const env = stringEnv();
  env.LD_LIBRARY_PATH = [join(dir, 'lib'), env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  env.FONTCONFIG_FILE = join(dir, 'fonts.conf');
  return { source: 'bundled', executablePath: join(dir, 'chromium'), env };
}

/** Regular files and folders of a ustar archive (all these archives hold) into dest. */
function extractTar(tar: Buffer, dest: string) {
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, length: number) => header.subarray(start, start + length).toString('utf8').replace(/\0.*$/s, '');
    const prefix = field(345, 155);
    const name = (prefix ? `${prefix}/` : '') + field(0, 100);
    const size = Number.parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1) || '0';
    const mode = Number.parseInt(field(100, 8).trim() || '644', 8);
    const path = join(dest, name);
    if (!path.startsWith(`${dest}/`)) throw new Error(`archive entry ${name} is outside its folder`);
    if (type === '5') mkdirSync(path, { recursive: true });
    else if (type === '0') {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, tar.subarray(offset + 512, offset + 512 + size), { mode });
    } else throw new Error(`archive entry ${name} has type ${type}, which this reader does not unpack`);
    offset += 512 + Math.ceil(size / 512) * 512;
  }
}
