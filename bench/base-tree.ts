import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../scripts/lib/cli.ts';

/** A commit checked out beside this tree, with node_modules, so its own `npm start` stack can run. */
export interface BaseTree {
  ref: string;
  commit: string;
  /** The checkout, ending in a slash like PROJECT_ROOT. */
  root: string;
  /** How it got its node_modules: a link to this tree's (same package-lock.json) or its own `npm ci`. */
  nodeModules: 'linked' | 'npm ci';
  /** Removes the checkout and its worktree entry; safe to call twice. */
  remove(): void;
}

const git = (args: string[], cwd = PROJECT_ROOT) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

/** The commit a ref names, or a clear error naming the ref. */
export function resolveCommit(ref: string): string {
  try {
    return git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]);
  } catch {
    throw new Error(`--base ${ref}: not a commit in ${PROJECT_ROOT} (try a commit id, a branch, or origin/main after git fetch)`);
  }
}

/**
 * `git worktree add --detach` of `ref` into a temporary folder. An identical package-lock.json
 * means identical dependencies, so the folder links this tree's node_modules (seconds) instead of
 * running `npm ci` (minutes).
 */
export function checkOutBase(ref: string): BaseTree {
  const commit = resolveCommit(ref);
  const root = `${mkdtempSync(join(tmpdir(), 'starbase-bench-base-'))}/`;
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    try {
      git(['worktree', 'remove', '--force', root]);
    } catch {
      // not (or no longer) a worktree: the folder goes below, and prune forgets the entry
    }
    rmSync(root, { recursive: true, force: true });
    git(['worktree', 'prune']);
  };
  try {
    git(['worktree', 'add', '--detach', root, commit]);
    const sameLock = existsSync(`${root}package-lock.json`) &&
      readFileSync(`${root}package-lock.json`).equals(readFileSync(`${PROJECT_ROOT}package-lock.json`));
    if (sameLock) {
      symlinkSync(`${PROJECT_ROOT}node_modules`, `${root}node_modules`, 'dir');
    } else {
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    }
    return { ref, commit, root, nodeModules: sameLock ? 'linked' : 'npm ci', remove };
  } catch (error) {
    remove();
    throw error;
  }
}
