// The top of a state's page: its name (and whether OpenTofu encrypts it), what an import or
// an action just did, the page's error, and the facts of its latest version: lineage, number,
// serial and size, the last change and who made it; and which CI jobs alone change it when a
// protected-state rule matches it.

import { ErrorText, Hcl, Link, Time } from '../../components';
import { actor, bytes } from '../../format';
import { protectionText } from '../../trust';
import type { StateView } from '../../types';

export function Summary(props: {
  name: string;
  state: StateView;
  /** The state's backend.hcl, shown right after an import. */
  imported: string | null;
  notice: string | null;
  error: string | null;
}) {
  const { state } = props;
  const latest = state.latest_version;
  return (
    <>
      <p class="crumbs">
        <Link href="/states">Terraform States</Link> /
      </p>
      <div class="title-row">
        <h1>{props.name}</h1>
        {state.opentofu_encrypted && <span class="badge encrypted">OpenTofu-encrypted</span>}
        {state.protections.length > 0 && <span class="badge protected">Protected</span>}
      </div>
      {props.imported !== null && (
        <section class="notice" role="status">
          <p>Imported. Use it with this backend.hcl:</p>
          <Hcl text={props.imported} label="backend.hcl of the imported state" />
        </section>
      )}
      {props.notice && (
        <p class="notice" role="status">
          {props.notice}
        </p>
      )}
      <ErrorText error={props.error} />
      <dl class="facts">
        <dt>Lineage</dt>
        <dd>
          <code>{state.lineage ?? 'none'}</code>
        </dd>
        <dt>Latest version</dt>
        {latest === null ? (
          <dd>none yet</dd>
        ) : (
          <dd>
            {latest} (serial {state.serial ?? 'none'}, {state.size === null ? 'size unknown' : bytes(state.size)})
          </dd>
        )}
        {state.protections.length > 0 && (
          <>
            <dt>Protected</dt>
            <dd>{protectionText(state.protections)}</dd>
          </>
        )}
        <dt>Last change</dt>
        <dd>{latest === null ? 'none yet' : <><Time at={state.updated_at} /> by {actor(state.updated_by)}</>}</dd>
      </dl>
    </>
  );
}
