import { noopRegistry } from './systems/engine.ts';

// `npm run worker -- --types bench/cli-job-types.ts`: the bench's no-op job type, so the CLI runs
// the same jobs as the in-process runner it is compared with (bench/cli.ts).
export default noopRegistry(() => {}).list();
