// A TCP proxy in front of the API server that can go away and come back on the same port:
// how the operator tests make the API server unreachable without restarting it.
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  readonly port: number;
  /** Connections accepted since the proxy started (what a client opened to the API server). */
  accepted(): number;
  /** Stops listening and cuts every connection (as a network partition would). */
  close(): Promise<void>;
  /** Listens again on the same port. */
  open(): Promise<void>;
}

export async function startTcpProxy(target: URL): Promise<TcpProxy> {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  let port = 0;
  let accepted = 0;
  const open = async (): Promise<void> => {
    server = createServer((down) => {
      accepted += 1;
      const up = createConnection({ host: target.hostname, port: Number(target.port) });
      sockets.add(down).add(up);
      down.pipe(up).pipe(down);
      const end = (): void => {
        down.destroy();
        up.destroy();
        sockets.delete(down);
        sockets.delete(up);
      };
      down.on('error', end).on('close', end);
      up.on('error', end).on('close', end);
    });
    await new Promise<void>((resolve, reject) => {
      server!.once('error', reject).listen(port, '127.0.0.1', () => resolve());
    });
    port = (server.address() as { port: number }).port;
  };
  await open();
  return {
    port,
    accepted: () => accepted,
    async close() {
      const s = server;
      server = undefined;
      for (const sock of sockets) sock.destroy();
      sockets.clear();
      await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
    },
    open,
  };
}
