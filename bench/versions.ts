import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The installed version of a package (from its package.json under node_modules). */
export function packageVersion(name: string): string {
  return (JSON.parse(readFileSync(`${ROOT}node_modules/${name}/package.json`, 'utf8')) as { version: string }).version;
}

/** This project's version plus the commit (and "+dirty" when the tree has changes). */
export function engineVersion(): string {
  const own = (JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { version: string }).version;
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'queue', 'migrations'], { cwd: ROOT, encoding: 'utf8' }).trim();
    return `${own}@${commit}${dirty ? '+dirty' : ''}`;
  } catch {
    return own;
  }
}
