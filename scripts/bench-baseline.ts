// The ceilings the real routes are compared against, each a process of its own started by
// bench.ts: a bare route returning a token-sized constant JSON object, through Fastify
// (`fastify`, the default) or straight on node:http (`node`: the runtime's own ceiling, what
// any HTTP server in node pays before its first line of logic), or the very bytes of a read
// of the daemon (`same <file>`: its status, headers and body, captured once by bench-http.ts;
// the ceiling a read of the daemon is judged against). Prints its port.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Fastify from 'fastify';

const TOKEN = {
  AccessorID: '6a1253d2-1785-24fd-91c2-f8e78c745511',
  SecretID: '45a3bd52-07c7-47a4-52fd-0745e0cfe967',
  Description: 'Agent token for node-1',
  Policies: [{ ID: '165d4317-e379-f732-ce70-86278c4558f7', Name: 'node-read' }],
  Local: false,
  CreateTime: '2026-11-22T10:00:00.000Z',
  Hash: 'UuiRkOQPRCvoRZHRtUxxbrmwZ5crYrOdZ0Z1FTFbTbA=',
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 59,
  ModifyIndex: 59,
};

let port = 0;
if (process.argv[2] === 'same') {
  // The answer as the daemon gave it; node adds what it adds to every answer (date, keep-alive).
  const answer = JSON.parse(readFileSync(process.argv[3] as string, 'utf8')) as { status: number; headers: Record<string, string>; body: string };
  const server = createServer((_req, res) => {
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  port = typeof addr === 'object' && addr ? addr.port : 0;
} else if (process.argv[2] === 'node') {
  // The same work a JSON route must do per request: serialise the object, send it with its length.
  const server = createServer((req, res) => {
    if (req.url !== '/baseline') {
      res.statusCode = 404;
      res.end();
      return;
    }
    const body = JSON.stringify(TOKEN);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  port = typeof addr === 'object' && addr ? addr.port : 0;
} else {
  const app = Fastify();
  app.get('/baseline', async () => TOKEN);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  port = typeof addr === 'object' && addr ? addr.port : 0;
}
process.stdout.write(`${port}\n`);
