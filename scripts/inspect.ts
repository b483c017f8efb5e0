import { main } from './ops.ts';

// `npm run inspect`: the quick-check view — depth by status and type, the leader lease, running
// jobs with owner and age, and stuck jobs (a step running over 2 h). Same as `npm run ops -- inspect`.
process.exitCode = await main(['inspect', ...process.argv.slice(2)]);
