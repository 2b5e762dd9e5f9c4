// A bare Fastify route returning a token-sized constant JSON object: the ceiling the
// real routes are compared against. Started as its own process by bench.ts.
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

const app = Fastify();
app.get('/baseline', async () => TOKEN);
await app.listen({ host: '127.0.0.1', port: 0 });
const addr = app.server.address();
process.stdout.write(`${typeof addr === 'object' && addr ? addr.port : 0}\n`);
