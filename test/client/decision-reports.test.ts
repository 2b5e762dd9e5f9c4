import { describe, expect, it } from 'vitest';
import { DecisionReports, MAX_BATCH } from '../../src/client/decision-reports.js';

/** An enforcing client's reports of its decisions: bounded batches, dropped and counted when they cannot go. */
describe('DecisionReports', () => {
  const sent: Array<Record<string, unknown>> = [];
  const send = (frame: object) => {
    sent.push(frame as Record<string, unknown>);
    return true;
  };

  it('sends each denial once per batch with its count, a sample of allows once per window, and nothing when idle', () => {
    const r = new DecisionReports('svc');
    for (let i = 0; i < 3; i++) r.note(1, 'service', 'db', 'write', 'default', 'default', false);
    for (let i = 0; i < 64; i++) r.note(1, 'service', 'web', 'read', 'default', 'default', true);
    r.noteUnknown();
    sent.length = 0;
    r.flush(send);
    expect(sent).toEqual([
      {
        client: 'svc',
        denied: [[1, 'service', 'db', 'write', 'default', 'default', 3]],
        allowed: [[1, 'service', 'web', 'read', 'default', 'default']],
        unknown: 1,
        dropped: 0,
      },
    ]);
    // The same allow again within the window: not again; an idle second sends nothing.
    for (let i = 0; i < 64; i++) r.note(1, 'service', 'web', 'read', 'default', 'default', true);
    r.flush(send);
    expect(sent).toHaveLength(1);
    expect(r.stats).toEqual({ reports: 1, dropped: 0 });
  });

  it(`keeps at most ${MAX_BATCH} entries a batch, and counts the rest, told in the next report`, () => {
    const r = new DecisionReports('svc');
    for (let i = 0; i < MAX_BATCH + 250; i++) r.note(i, 'key', `k${i}`, 'read', 'default', 'default', false);
    sent.length = 0;
    r.flush(send);
    expect(sent[0]?.denied).toHaveLength(MAX_BATCH);
    expect(sent[0]?.dropped).toBe(250);
    expect(r.stats.dropped).toBe(250);
  });

  it('drops and counts a batch the daemon cannot take, and says so in the next one', () => {
    const r = new DecisionReports('svc');
    r.note(1, 'service', 'db', 'write', 'default', 'default', false);
    r.note(2, 'service', 'db', 'write', 'default', 'default', false);
    r.flush(() => false);
    expect(r.stats).toEqual({ reports: 0, dropped: 2 });
    sent.length = 0;
    r.flush(send);
    expect(sent).toEqual([{ client: 'svc', denied: [], allowed: [], unknown: 0, dropped: 2 }]);
  });
});
