import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DocBlock {
  file: string;
  /** `file: the block on one line` (cut at 140 characters), how the checks name a block. */
  key: string;
  lang: string;
  text: string;
  /** The fenced `text` block right after this one: the output the doc says it prints. */
  output?: string;
}

/** The docs a reader runs commands from: README.md and docs/*.md. */
export function docFiles(root = '.'): string[] {
  return ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
}

/** Every fenced block of a markdown file, with the output block that follows a shell block. */
export function fencedBlocks(file: string, root = '.'): DocBlock[] {
  const text = readFileSync(join(root, file), 'utf8');
  const fence = /^```([a-z]*)\n([\s\S]*?)^```\s*$/gm;
  const blocks: Array<DocBlock & { end: number; start: number }> = [];
  for (let m = fence.exec(text); m; m = fence.exec(text)) {
    const body = m[2]!;
    const oneLine = body.replace(/\\\n/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 140);
    blocks.push({ file, key: `${file}: ${oneLine}`, lang: m[1]!, text: body, start: m.index, end: m.index + m[0].length });
  }
  for (let i = 0; i + 1 < blocks.length; i++) {
    const next = blocks[i + 1]!;
    if (next.lang === 'text' && text.slice(blocks[i]!.end, next.start).trim() === '') blocks[i]!.output = next.text;
  }
  return blocks.map(({ end: _end, start: _start, ...b }) => b);
}

/** Shell blocks holding a command a reader would run: curl or npm. */
export function commandBlocks(root = '.'): DocBlock[] {
  return docFiles(root)
    .flatMap((f) => fencedBlocks(f, root))
    .filter((b) => ['sh', 'bash', 'shell', 'console'].includes(b.lang) && /\b(curl|npm|npx)\b/.test(b.text));
}

/** Whether `actual` is what the doc shows, `<placeholder>`s standing for any text (ids, times). */
export function matchesShown(shown: string, actual: string): boolean {
  const pattern = shown.trim().split(/<[a-z][a-z ]*>/).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]+?');
  return new RegExp(`^${pattern}$`).test(actual.trim());
}
