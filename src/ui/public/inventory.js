// The inventory (docs/http-api.md, "Inventory"): what tokens this datacenter holds, drawn as bars.
import { Loading, api, html, useLoad } from './lib.js';

/** The largest entries of a count map, at most `limit`, the rest summed as "other". */
function top(counts, limit = 15) {
  const all = Object.entries(counts).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const shown = all.slice(0, limit);
  const rest = all.slice(limit).reduce((sum, [, n]) => sum + n, 0);
  return rest > 0 ? [...shown, ['other', rest]] : shown;
}

/** A horizontal bar chart of named counts, each bar against the largest. */
function Bars({ title, counts, testid, empty }) {
  const rows = top(counts);
  const max = Math.max(1, ...rows.map(([, n]) => n));
  return html`<section class="chart" data-testid=${testid}><h2>${title}</h2>
    ${
      rows.length === 0
        ? html`<p class="muted">${empty ?? 'None.'}</p>`
        : html`<table class="bars"><tbody>${rows.map(
            ([name, n]) => html`<tr><th scope="row">${name === '' ? '(token API)' : name}</th>
              <td><svg width="240" height="12" role="img" aria-label=${`${name || 'token API'}: ${n}`}>
                <rect width="240" height="12" rx="2" fill="var(--line, #e3e7ee)" />
                <rect width=${Math.max(1, Math.round((240 * n) / max))} height="12" rx="2" fill="var(--accent, #2f62c9)" />
              </svg></td><td class="num">${n}</td></tr>`,
          )}</tbody></table>`
    }</section>`;
}

function Figure({ label, value, hint, testid }) {
  return html`<div class="figure" data-testid=${testid}><div class="value">${value}</div><div class="label">${label}</div>${hint ? html`<div class="hint">${hint}</div>` : null}</div>`;
}

export function Inventory() {
  const inv = useLoad(() => api('GET', '/v1/acl/inventory'), []);
  return html`<h1>Inventory</h1>
    <p class="muted">The tokens this datacenter holds (its global ones and its own Local ones; expired ones until the reaper takes them), counted from the store's indexes.</p>
    <${Loading} result=${inv}>${(c) => html`
      <div class="figures">
        <${Figure} testid="inv-tokens" label="tokens" value=${c.Tokens} hint=${`${c.Global} global, ${c.Local} local`} />
        <${Figure} testid="inv-expiring" label="expire within 24 h" value=${c.ExpiringWithin24h} hint=${`${c.ExpiringWithin1h} within the hour`} />
        <${Figure} testid="inv-never-used" label="never used" value=${c.NeverUsed} />
        <${Figure} testid="inv-unused" label="unused for 30 days" value=${c.UnusedFor30d} />
        <${Figure} testid="inv-acl-write" label="hold acl:write" value=${c.ACLWriteHolders} />
      </div>
      <div class="charts">
        <${Bars} testid="inv-by-method" title="By auth method" counts=${c.ByAuthMethod} />
        <${Bars} testid="inv-by-role" title="By role" counts=${c.ByRole} empty="No token links a role." />
        <${Bars} testid="inv-by-policy" title="By policy" counts=${c.ByPolicy} empty="No token links a policy." />
        <${Bars} testid="inv-by-namespace" title="By namespace" counts=${c.ByNamespace} />
        <${Bars} testid="inv-by-partition" title="By partition" counts=${c.ByPartition} />
        <${Bars} testid="inv-quotas" title="Quotas: tokens used" counts=${Object.fromEntries(c.Quotas.map((q) => [q.MaxTokens === undefined ? q.Name : `${q.Name} (of ${q.MaxTokens})`, q.Used]))} empty="No quotas." />
      </div>`}<//>`;
}
