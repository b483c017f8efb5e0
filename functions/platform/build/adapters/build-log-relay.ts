import { DurableObject } from 'cloudflare:workers';
import type { LogLine } from '../ports/build-service.ts';
import type { BuildOutcome, LogRelay } from '../ports/log-relay.ts';
import { currentUsage } from '../../../usage.ts';

/**
 * One Durable Object per build relays its log lines to live viewers over WebSockets.
 *
 * Why a Durable Object with WebSocket hibernation (and not SSE from the Worker): viewers of one
 * build must all see the lines a poll step read, but that step runs in some other invocation (a
 * tick, a kick) that cannot reach viewers' connections; a per-build object is the one place both
 * meet. Between polls (seconds apart) nothing happens, and hibernation lets the object sleep with
 * its sockets open, so a watched build costs nothing while idle. Lines carry sequence numbers;
 * the object keeps the most recent ones so a viewer who joins mid-build sees them first.
 */
const BACKLOG = 1000;

type Message = { type: 'lines'; lines: LogLine[] } | { type: 'end'; outcome: BuildOutcome };

export class BuildLogRelay extends DurableObject {
  /** A viewer connects (the logs route forwards the WebSocket upgrade here). */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket') {
      return new Response('expected a WebSocket upgrade', { status: 426 });
    }
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server);
    const backlog = (await this.ctx.storage.get<LogLine[]>('backlog')) ?? [];
    if (backlog.length) server.send(JSON.stringify({ type: 'lines', lines: backlog } satisfies Message));
    const ended = await this.ctx.storage.get<BuildOutcome>('ended');
    if (ended) server.send(JSON.stringify({ type: 'end', outcome: ended } satisfies Message));
    return new Response(null, { status: 101, webSocket: client });
  }

  /** New lines from a poll step: kept (deduplicated by sequence) and sent to every viewer. */
  async publish(lines: LogLine[]): Promise<number> {
    const backlog = (await this.ctx.storage.get<LogLine[]>('backlog')) ?? [];
    const last = backlog.at(-1)?.seq ?? 0;
    const fresh = lines.filter((l) => l.seq > last);
    if (fresh.length === 0) return 0;
    await this.ctx.storage.put('backlog', [...backlog, ...fresh].slice(-BACKLOG));
    this.broadcast({ type: 'lines', lines: fresh });
    return fresh.length;
  }

  /** The build ended: tell viewers, then close their sockets. */
  async end(outcome: BuildOutcome): Promise<void> {
    await this.ctx.storage.put('ended', outcome);
    this.broadcast({ type: 'end', outcome });
    for (const ws of this.ctx.getWebSockets()) ws.close(1000, `build ${outcome}`);
  }

  override webSocketMessage(): void {
    // viewers only listen
  }

  override webSocketClose(ws: WebSocket, code: number): void {
    ws.close(code === 1005 ? 1000 : code, 'closing');
  }

  private broadcast(message: Message): void {
    const text = JSON.stringify(message);
    for (const ws of this.ctx.getWebSockets()) {
      try {
        ws.send(text);
      } catch {
        // a viewer that went away is dropped by the runtime
      }
    }
  }
}

/** The LogRelay port over the per-build Durable Objects. */
export class DurableObjectLogRelay implements LogRelay {
  constructor(private readonly namespace: DurableObjectNamespace<BuildLogRelay>) {}

  async publish(buildId: string, lines: LogLine[]): Promise<void> {
    currentUsage()?.countSubrequest('durable-object');
    await this.namespace.get(this.namespace.idFromName(buildId)).publish(lines);
  }

  async end(buildId: string, outcome: BuildOutcome): Promise<void> {
    currentUsage()?.countSubrequest('durable-object');
    await this.namespace.get(this.namespace.idFromName(buildId)).end(outcome);
  }
}
