// The changes view of one version on the state page: what changed since another version
// (by default the one before), chosen in "Compare with". Resource instances and outputs
// added, changed (with the attribute paths that differ) and removed, the `+a ~c -r`
// counts, both sides' serial, Terraform version and lineage, a notice when the lineages
// differ, and a refusal (an OpenTofu-encrypted side) in the server's words. The API answers
// names and paths only, and every one of them is rendered as text.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

import { api, ApiError, seg } from './api';
import { countsText, countsWords, nothingChanged, otherText, outputChange, pathParts } from './comparison';
import { ErrorText } from './components';
import { useLoad } from './loading';
import type { ChangeCounts, ChangedInstance, Comparison, ComparedSide, InstanceRef, OutputRef, Version } from './types';

function Side(props: { side: ComparedSide }) {
  const s = props.side;
  return (
    <>
      serial {s.serial ?? 'none'} · Terraform {s.terraform_version ?? 'unknown'} · lineage{' '}
      <code>{s.lineage ?? 'none'}</code>
    </>
  );
}

function Sensitive() {
  return <span class="badge sensitive">sensitive</span>;
}

/** A group of the list (added, changed or removed) under its heading, left out when empty. */
function Group<T>(props: { of: string; title: string; sign: string; items: T[]; item: (t: T) => ComponentChildren }) {
  if (!props.items.length) return null;
  return (
    <>
      <h4>
        {props.title} ({props.items.length})
      </h4>
      <ul class={`change-list ${props.title.toLowerCase()}`} aria-label={`${props.of} ${props.title.toLowerCase()}`}>
        {props.items.map((t, i) => (
          <li key={i}>
            <span class="sign" aria-hidden="true">
              {props.sign}
            </span>{' '}
            {props.item(t)}
          </li>
        ))}
      </ul>
    </>
  );
}

function Changed(props: { instance: ChangedInstance }) {
  const i = props.instance;
  const other = otherText(i);
  return (
    <>
      <code class="address">{i.address}</code>
      {i.attributes.length > 0 && (
        <ul class="paths" aria-label={`Attributes of ${i.address} that differ`}>
          {pathParts(i).map((p) => (
            <li key={p.path}>
              <code>{p.path}</code>
              {p.sensitive && <Sensitive />}
            </li>
          ))}
        </ul>
      )}
      {i.sensitive_only && <span class="muted"> only sensitive attributes changed (no value is shown)</span>}
      {other && <span class="muted"> {other}</span>}
    </>
  );
}

const address = (i: InstanceRef) => <code class="address">{i.address}</code>;
const output = (o: OutputRef) => (
  <>
    <code>{o.name}</code>
    {o.sensitive && <Sensitive />}
  </>
);

export function VersionComparison(props: {
  name: string;
  version: number;
  since: number | null;
  versions: Version[];
  onCompare: (since: number | null) => void;
  onClose: () => void;
  onCounts: (version: number, counts: ChangeCounts) => void;
}) {
  const { name, version, since } = props;
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    // Opened from a version's row, the focus goes to the view, so a keyboard or screen
    // reader user is where the answer is; another "Compare with" leaves it on the choice.
    heading.current?.focus();
  }, [name, version]);

  const compared = useLoad(async () => {
    const query = since === null ? '' : `?since=${since}`;
    try {
      const c = await api<Comparison>('GET', `/api/tf-states/${seg(name)}/versions/${version}/changes${query}`);
      // Only the default comparison is the row's `+a ~c -r`: another one says something else.
      if (since === null) props.onCounts(version, c.counts);
      return c;
    } catch (e) {
      const refused = e instanceof ApiError && e.code === 'cannot_compare';
      throw refused ? new Error(`These versions cannot be compared here: ${e.message}`) : e;
    }
  }, [name, version, since]);
  // What another comparison answered is not shown while this one is read, nor beside its error.
  const changes = compared.loading || compared.error ? null : compared.value;
  const error = compared.loading ? null : compared.error;

  const others = props.versions.filter((v) => v.version !== version);
  return (
    <section aria-labelledby="changes-title" class="changes">
      <div class="title-row">
        <h2 id="changes-title" tabIndex={-1} ref={heading}>
          What changed in version {version}
        </h2>
        <button type="button" class="secondary small" onClick={props.onClose}>
          Close changes
        </button>
      </div>
      <label for="compare-with">Compare with</label>
      <select
        id="compare-with"
        value={since === null ? '' : String(since)}
        onChange={(e) => {
          const value = (e.target as HTMLSelectElement).value;
          props.onCompare(value === '' ? null : Number(value));
        }}
      >
        <option value="">{version === 1 ? 'nothing (version 1 is the first)' : 'the version before'}</option>
        {others.map((v) => (
          <option key={v.version} value={String(v.version)}>
            version {v.version}
          </option>
        ))}
      </select>
      <ErrorText error={error} />
      {!changes && !error && <p aria-live="polite">Comparing…</p>}
      {changes && (
        <div class="changes-answer">
          <p class="counts">
            <strong aria-hidden="true">{countsText(changes.counts)}</strong>
            <span class="visually-hidden">{countsWords(changes.counts)}</span> resource instances
          </p>
          <dl class="facts">
            <dt>Version {changes.version.version}</dt>
            <dd>
              <Side side={changes.version} />
            </dd>
            <dt>Compared with</dt>
            <dd>
              {changes.since ? (
                <>
                  version {changes.since.version}: <Side side={changes.since} />
                </>
              ) : (
                `nothing: version ${changes.version.version} is the first, so everything it holds is added`
              )}
            </dd>
          </dl>
          {!changes.same_lineage && changes.since && (
            <p class="reason lineage">
              Different lineages: version {changes.version.version} and version {changes.since.version} come from
              different configurations (or one state was pushed over another). They are compared all the same.
            </p>
          )}
          {nothingChanged(changes) ? (
            <p>Nothing changed: the same resource instances and outputs, with the same attributes.</p>
          ) : (
            <>
              <h3>Resource instances</h3>
              {changes.counts.added + changes.counts.changed + changes.counts.removed === 0 && <p>None changed.</p>}
              <Group of="Resource instances" title="Added" sign="+" items={changes.resources.added} item={address} />
              <Group
                of="Resource instances"
                title="Changed"
                sign="~"
                items={changes.resources.changed}
                item={(i: ChangedInstance) => <Changed instance={i} />}
              />
              <Group of="Resource instances" title="Removed" sign="-" items={changes.resources.removed} item={address} />
              <h3>Outputs</h3>
              {changes.outputs.added.length + changes.outputs.changed.length + changes.outputs.removed.length === 0 && (
                <p>None changed.</p>
              )}
              <Group of="Outputs" title="Added" sign="+" items={changes.outputs.added} item={output} />
              <Group
                of="Outputs"
                title="Changed"
                sign="~"
                items={changes.outputs.changed}
                item={(o) => (
                  <>
                    {output(o)} <span class="muted">{outputChange(o)}</span>
                  </>
                )}
              />
              <Group of="Outputs" title="Removed" sign="-" items={changes.outputs.removed} item={output} />
            </>
          )}
          <p class="muted">Names and attribute paths only: no value of either version is shown.</p>
        </div>
      )}
    </section>
  );
}
