// Operations pages: every datacenter with its replication status and an hour of lag, and the
// servers of the chosen datacenter (leader, term, synchronous set, each server's position).
import { useState } from 'preact/hooks';
import { ErrorBox, Loading, Notice, api, confirmThen, explain, html, state, useLoad } from './lib.js';

export function Datacenters() {
  const dcs = useLoad(async () => {
    const names = await api('GET', '/v1/catalog/datacenters', undefined, { dc: '' });
    const rows = await Promise.all(
      names.map(async (name) => {
        try {
          // The primary it follows and its epoch need operator:read: without it, that column stays empty.
          const [status, follows] = await Promise.all([
            api('GET', '/v1/acl/replication', undefined, { dc: name }),
            api('GET', '/v1/operator/primary', undefined, { dc: name }).catch(() => undefined),
          ]);
          return { name, status, follows };
        } catch (err) {
          return { name, error: explain(err) };
        }
      }),
    );
    // The primary samples every secondary's lag: its history is the whole picture.
    const history = await api('GET', '/v1/internal/ui/replication-history', undefined, { dc: names[0] }).catch(() => ({
      IntervalMs: 0,
      Samples: [],
    }));
    return { rows, history };
  }, []);
  return html`<h1>Datacenters</h1>
    <${Loading} result=${dcs}>${({ rows, history }) => html`<div class="table-wrap"><table data-testid="datacenters">
      <thead><tr><th>Datacenter</th><th>Role</th><th>Follows</th><th>Replication</th><th>Replicated index</th><th>Lag (entries)</th><th>Last contact</th></tr></thead>
      <tbody>${rows.map(({ name, status, follows, error }) => {
        if (error)
          return html`<tr data-dc=${name}><td>${name}</td><td colspan="6"><span class="badge bad">Unreachable</span> ${error}</td></tr>`;
        const primary = !status.Enabled;
        return html`<tr data-dc=${name}>
          <td>${name}${name === state.localDC ? html` <span class="badge">this one</span>` : null}</td>
          <td>${primary ? 'primary' : 'secondary'}</td>
          <td data-testid="follows">${follows ? `${follows.Datacenter}, epoch ${follows.Epoch}` : '—'}</td>
          <td>${primary ? html`<span class="badge ok">Primary</span>` : status.Connected ? html`<span class="badge ok">Connected</span>` : html`<span class="badge bad">Not connected</span>`}
            ${status.RefusingGlobalTokens ? html` <span class="badge bad">refusing global tokens (stale)</span>` : null}</td>
          <td>${status.ReplicatedIndex}</td>
          <td data-testid="lag">${primary ? '—' : status.LagEntries}</td>
          <td>${primary ? '—' : `${status.LastContactMs} ms ago`}</td></tr>`;
      })}</tbody></table></div>
      <${PrimaryRole} rows=${rows} reload=${dcs.reload} />
      <${Upgrade} />
      <h2>Replication lag, last hour</h2>
      <${LagChart} history=${history} />`}<//>`;
}

/**
 * An upgrade under way (docs/upgrading.md, "Upgrading"): the release each server of each datacenter runs and
 * the versions it speaks, who is behind, what waits, and the finalize once every server runs this
 * release. Needs operator:read (write to finalize); hidden without it.
 */
function Upgrade() {
  const status = useLoad(() => api('GET', '/v1/operator/upgrade').catch(() => undefined), []);
  const [outcome, setOutcome] = useState({});
  const s = status.data;
  if (!s) return null;
  const range = (r) => (r ? (r[0] === r[1] ? `${r[0]}` : `${r[0]}–${r[1]}`) : '—');
  const finalize = () =>
    api('PUT', '/v1/operator/upgrade?finalize').then(
      () => {
        setOutcome({ notice: 'The upgrade is finalized.' });
        status.reload();
      },
      (err) => setOutcome({ error: explain(err) }),
    );
  return html`<section data-testid="upgrade"><h2>Releases</h2>
    <div class="table-wrap"><table><thead><tr><th>Datacenter</th><th>Server</th><th>Release</th><th>Replication</th><th>Servers' stream</th></tr></thead>
    <tbody>${s.Datacenters.flatMap((d) =>
      d.Servers.map(
        (
          x,
        ) => html`<tr><td>${d.Datacenter}${d.Partial ? html` <span class="badge">only its leader known</span>` : null}</td><td>${x.Name}</td>
          <td>${x.Release ?? html`<span class="badge bad">not heard from</span>`}</td><td>${range(x.Replication)}</td><td>${range(x.Servers)}</td></tr>`,
      ),
    )}</tbody></table></div>
    <p>Finalized: ${s.Finalized ? `${s.Finalized.Release} (replication ${s.Finalized.Replication})` : 'not yet'}.${' '}
      ${s.Behind.length ? `Behind: ${s.Behind.join(', ')}.` : 'Every server runs this release.'}</p>
    ${s.Waiting.map((w) => html`<p>Waiting for the finalize: ${w.Feature} (needs ${w.Needs}).</p>`)}
    ${s.CanFinalize ? html`<button type="button" onClick=${finalize}>Finalize the upgrade</button>` : null}
    ${outcome.notice ? html`<p class="notice">${outcome.notice}</p>` : null}
    ${outcome.error ? html`<p class="error">${outcome.error}</p>` : null}
  </section>`;
}

/**
 * The primary role's two moves (docs/datacenters.md), each behind a confirmation that says what it does:
 * a planned transfer at the primary (nothing lost, writes wait a moment), and the promotion of a
 * secondary once the primary is lost (what the primary acknowledged after the recovery point may be lost).
 */
function PrimaryRole({ rows, reload }) {
  const [outcome, setOutcome] = useState({});
  const reachable = rows.filter((r) => r.follows);
  const primary = reachable.find((r) => r.follows.Datacenter === r.name);
  const secondaries = reachable.filter((r) => r.follows.Datacenter !== r.name);
  const [target, setTarget] = useState('');
  if (reachable.length === 0) return null;
  const run = (dc, path) =>
    api('PUT', path, undefined, { dc }).then(
      (r) => {
        setOutcome({ notice: `${r.Datacenter} is the primary now (epoch ${r.Epoch}). ${r.Warning}` });
        reload();
      },
      (err) => setOutcome({ error: explain(err) }),
    );
  const transfer = () => {
    const to = target || secondaries[0]?.name;
    confirmThen(
      `Hand the primary role from ${primary.name} to ${to}? ACL writes wait a moment while ${to} takes every write ${primary.name} acknowledged; nothing is lost, and ${primary.name} becomes a secondary of ${to}.`,
      () => run(primary.name, `/v1/operator/primary?transfer=${encodeURIComponent(to)}`),
    );
  };
  const promote = ({ name, follows }) =>
    confirmThen(
      `Promote ${name} to primary? Only when the primary ${follows.Datacenter} is lost: global writes it acknowledged after index ${follows.Index} (the last ${name} applied) may be lost, and ${follows.Datacenter} rejoins as a secondary when it returns.`,
      () => run(name, '/v1/operator/primary?promote'),
    );
  return html`<section class="primary-role" data-testid="primary-role">
    <h2>Primary role</h2>
    <${ErrorBox} message=${outcome.error} /><${Notice} message=${outcome.notice} />
    ${
      primary && secondaries.length > 0
        ? html`<p><label for="transfer-to">Hand the role from ${primary.name} to </label>
          <select id="transfer-to" value=${target || secondaries[0].name} onChange=${(e) => setTarget(e.currentTarget.value)}>
            ${secondaries.map((r) => html`<option value=${r.name}>${r.name}</option>`)}
          </select>
          <button type="button" data-testid="transfer" onClick=${transfer}>Transfer primary role…</button>
          <span class="muted"> planned: nothing is lost</span></p>`
        : null
    }
    ${secondaries.map(
      (
        r,
      ) => html`<p><button type="button" class="danger" data-testid=${`promote-${r.name}`} onClick=${() => promote(r)}>Promote ${r.name}…</button>
        <span class="muted"> after losing the primary: ${r.name} has applied its index ${r.follows.Index}</span></p>`,
    )}
  </section>`;
}

const COLORS = ['#1f5fbf', '#b45309', '#167a3e', '#7c3aed', '#b42318', '#0e7490'];

/** Lag in entries per secondary over the last hour, as the primary sampled it. */
export function LagChart({ history }) {
  const samples = history?.Samples ?? [];
  const byDC = new Map();
  for (const s of samples) {
    if (!byDC.has(s.Datacenter)) byDC.set(s.Datacenter, []);
    byDC.get(s.Datacenter).push(s);
  }
  if (byDC.size === 0) return html`<p class="muted" data-testid="lag-chart-empty">No secondary has been connected in the last hour.</p>`;
  const W = 720;
  const H = 200;
  const pad = { l: 48, r: 12, t: 10, b: 28 };
  const now = Date.now();
  const from = now - 3_600_000;
  const max = Math.max(1, ...samples.map((s) => s.LagEntries));
  const x = (t) => pad.l + ((t - from) / (now - from)) * (W - pad.l - pad.r);
  const y = (v) => H - pad.b - (v / max) * (H - pad.t - pad.b);
  const ticks = [0, 15, 30, 45, 60].map((m) => ({ t: from + m * 60_000, label: m === 60 ? 'now' : `-${60 - m} min` }));
  return html`<figure class="chart" data-testid="lag-chart">
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${`Replication lag of ${[...byDC.keys()].join(', ')} over the last hour, at most ${max} entries`}>
      <line x1=${pad.l} y1=${y(0)} x2=${W - pad.r} y2=${y(0)} class="axis" />
      <line x1=${pad.l} y1=${pad.t} x2=${pad.l} y2=${y(0)} class="axis" />
      <text x=${pad.l - 6} y=${y(max) + 4} text-anchor="end" class="tick">${max}</text>
      <text x=${pad.l - 6} y=${y(0) + 4} text-anchor="end" class="tick">0</text>
      ${ticks.map((k) => html`<text x=${x(k.t)} y=${H - 8} text-anchor="middle" class="tick">${k.label}</text>`)}
      ${[...byDC.entries()].map(
        ([dc, list], i) => html`<polyline data-dc=${dc} fill="none" stroke=${COLORS[i % COLORS.length]} stroke-width="2"
        points=${list.map((s) => `${x(s.Time).toFixed(1)},${y(s.LagEntries).toFixed(1)}`).join(' ')} />`,
      )}
    </svg>
    <figcaption>${[...byDC.entries()].map(([dc, list], i) => html`<span class="legend"><span class="swatch" style=${`background:${COLORS[i % COLORS.length]}`}></span>${dc}: now ${list[list.length - 1].LagEntries}, at most ${Math.max(...list.map((s) => s.LagEntries))} entries</span>`)}
      <span class="muted">(one sample every ${history.IntervalMs >= 1000 ? `${Math.round(history.IntervalMs / 1000)} s` : `${history.IntervalMs} ms`})</span></figcaption>
  </figure>`;
}

export function Servers() {
  const servers = useLoad(() => api('GET', '/v1/operator/servers'), []);
  return html`<h1>Servers of ${state.dc || state.localDC}</h1>
    <${Loading} result=${servers}>${(v) => html`
      <dl class="kv" data-testid="servers-summary">
        <dt>Leader</dt><dd>${v.Leader ?? html`<span class="badge bad">none known</span>`}</dd>
        <dt>Term</dt><dd>${v.Term}</dd>
        <dt>Synchronous set</dt><dd>${v.SyncSet.length ? v.SyncSet.join(', ') : html`<span class="muted">none</span>`}${v.RunningWithoutSyncCopy && v.Servers.length > 1 ? html` <span class="badge bad">writes held by the leader alone</span>` : null}</dd>
        ${v.Problem ? html`<dt>Problem</dt><dd class="error-text">${v.Problem}</dd>` : null}
      </dl>
      <div class="table-wrap"><table data-testid="servers">
        <thead><tr><th>Server</th><th>Address</th><th>Role</th><th>Term</th><th>Applied index</th><th>Applied batch</th><th>Lag (batches)</th><th>Sync set</th><th>State</th></tr></thead>
        <tbody>${v.Servers.map(
          (s) => html`<tr data-server=${s.Name}>
          <td>${s.Name}</td><td>${s.Address}</td>
          <td>${s.Role === 'leader' ? html`<span class="badge ok">leader</span>` : 'follower'}</td>
          <td>${s.Term}</td><td>${s.AppliedIndex ?? '—'}</td><td>${s.AppliedSeq}</td><td>${s.LagBatches}</td>
          <td>${s.InSyncSet ? 'yes' : 'no'}</td>
          <td>${!s.Registered ? html`<span class="badge bad">down (registration lapsed)</span>` : s.Connected ? html`<span class="badge ok">up</span>` : html`<span class="badge bad">up, not streaming</span>`}</td></tr>`,
        )}</tbody></table></div>
      <p class="muted">As ${v.AnsweredBy} sees it.</p>`}<//>`;
}
