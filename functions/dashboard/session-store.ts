/**
 * The dashboard's session rows live in the engine (queue/dashboard-sessions.ts), which owns
 * worker.*; the session module calls them through here.
 */
export { deleteAllSessions, deleteSession, insertSession, touchSession } from '../../queue/index.ts';
