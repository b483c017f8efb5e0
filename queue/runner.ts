// The runner's public entry: claim → run a step → settle. Each part has its own module under
// runner/ (claim loop, batch completer, step and its lease, settle retries); this file keeps the
// names the engine exports where they always were.
export type { ClaimRetryLine, RunCounts, Runner, RunOptions, StepLogLine, StepOutcome } from './runner/types.ts';
export { runSteps } from './runner/claim-loop.ts';
export { CompletionBatcher } from './runner/completer.ts';
export { runStep } from './runner/step.ts';
