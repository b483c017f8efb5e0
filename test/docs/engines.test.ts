import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * The README says which packages make `npm install` on a system Node 20 print an EBADENGINE
 * warning, and why each is harmless. Checked offline against package-lock.json: the packages
 * installed on linux-x64 whose `engines.node` refuses Node 20 are exactly the ones it names, none
 * of them has an install script, each accepts the pinned Node, and no .npmrc turns the warning
 * into a refusal.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The last Node 20 release line (Debian's): a range that refuses it refuses every 20 before it. */
const NODE_20 = '20.20.2';
const WORDS = ['none', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

type Locked = { name?: string; version?: string; engines?: { node?: string }; os?: string[]; cpu?: string[]; hasInstallScript?: boolean; dev?: boolean };
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, Locked> };
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; engines: { node: string } };

/** npm installs a package with an os/cpu list only where the list admits the platform. */
const admits = (list: string[] | undefined, value: string) =>
  !list || list.includes(value) || (list.every((x) => x.startsWith('!')) && !list.includes(`!${value}`));

const nameOf = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);

function refusingNode20(): Map<string, Locked> {
  const found = new Map<string, Locked>();
  for (const [path, p] of Object.entries(lock.packages)) {
    if (!path || !p.engines?.node || !admits(p.os, 'linux') || !admits(p.cpu, 'x64')) continue;
    if (!semver.satisfies(NODE_20, p.engines.node)) found.set(nameOf(path), p);
  }
  return found;
}

/** The README's paragraph about the warning, and the package names it lists. */
function readmeClaim(): { text: string; listed: string[]; count: string } {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const text = readme.split(/\n\n/).find((p) => p.includes('EBADENGINE'));
  if (!text) throw new Error('README.md has no paragraph about the EBADENGINE warning');
  const list = /devDependencies, ([^.]+?)\. They are harmless/s.exec(text);
  if (!list) throw new Error('README.md: the EBADENGINE paragraph lists no devDependencies');
  const listed = [...list[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const count = /\) and (\w+) devDependencies/.exec(text)?.[1] ?? '';
  return { text, listed, count };
}

describe('README: the EBADENGINE warnings of an install on Node 20', () => {
  it('names exactly the packages whose engines refuse Node 20, and the project itself', () => {
    const { text, listed, count } = readmeClaim();
    const refusing = refusingNode20();
    expect(semver.satisfies(NODE_20, pkg.engines.node), 'the project refuses Node 20').toBe(false);
    expect(text.replace(/\s+/g, ' ')).toContain(`this project itself (\`${pkg.engines.node}\`)`);
    expect([...listed].sort()).toEqual([...refusing.keys()].sort());
    expect(count, 'the README counts them in words').toBe(WORDS[listed.length]);
  });

  it('is harmless as it says: no install script among them, each accepts the pinned Node, no engine-strict', () => {
    const pinned = lock.packages['node_modules/node']?.version;
    expect(pinned && semver.major(pinned)).toBe(24);
    for (const [name, p] of refusingNode20()) {
      expect(p.hasInstallScript ?? false, `${name} has an install script`).toBe(false);
      expect(semver.satisfies(pinned!, p.engines!.node!), `${name} accepts Node ${pinned}`).toBe(true);
    }
    expect(semver.satisfies(pinned!, pkg.engines.node)).toBe(true);
    const npmrc = join(root, '.npmrc');
    if (existsSync(npmrc)) expect(readFileSync(npmrc, 'utf8')).not.toMatch(/^\s*engine-strict\s*=\s*true/m);
  });
});
