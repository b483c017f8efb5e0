/**
 * Lines for stdout, written together: the worker logs a line per step, and at thousands of steps
 * a second one write(2) per line (stdout to a pipe or a file is synchronous in Node) costs the
 * process more CPU than running the steps. Lines queued in one turn of the event loop go out in
 * one write at the next (setImmediate), in order; whatever is queued when the process exits is
 * written then, so an exit, process.exit() or a crash loses none.
 */
export interface LineWriter {
  line(text: string): void;
  /** Writes what is queued now. */
  flush(): void;
}

export function stdoutLines(out: { write(chunk: string): unknown } = process.stdout): LineWriter {
  let queued: string[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (queued.length === 0) return;
    const text = `${queued.join('\n')}\n`;
    queued = [];
    out.write(text);
  };
  process.on('exit', flush);
  return {
    line(text) {
      queued.push(text);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    flush,
  };
}
