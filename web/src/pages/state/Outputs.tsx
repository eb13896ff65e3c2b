// A state's outputs section, for a caller with tf_state:outputs: each output's name, type
// and value, a sensitive one marked (the API never answers with its value), and the
// terraform_remote_state block another configuration pastes to read them.

import { api, seg } from '../../api';
import { ErrorText, Hcl } from '../../components';
import { useLoad } from '../../loading';
import { isSensitive, remoteStateHcl, typeText, valueText } from '../../outputs';
import type { StateOutputs, StateView } from '../../types';

export function OutputsSection(props: { name: string; state: StateView; user: string }) {
  const { name, state } = props;
  // Read again when a new version comes: the outputs are the latest version's.
  const loaded = useLoad(
    () => api<StateOutputs>('GET', `/api/tf-states/${seg(name)}/outputs`),
    [name, state.latest_version],
  );
  const outputs = Object.entries(loaded.value?.outputs ?? {});
  return (
    <section aria-labelledby="outputs-title">
      <h2 id="outputs-title">Outputs</h2>
      <ErrorText error={loaded.error} />
      {loaded.value && outputs.length === 0 && <p>The latest version has no outputs.</p>}
      {loaded.value && outputs.length > 0 && (
        <div class="scroll">
          <table class="outputs">
            <caption class="visually-hidden">Outputs of serial {loaded.value.serial}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Type</th>
                <th scope="col">Value</th>
              </tr>
            </thead>
            <tbody>
              {outputs.map(([output, o]) => (
                <tr key={output}>
                  <th scope="row">
                    <code>{output}</code>
                  </th>
                  <td>
                    <code>{typeText(o.type)}</code>
                  </td>
                  <td>
                    {isSensitive(o) ? (
                      <span class="badge sensitive">sensitive</span>
                    ) : (
                      <code class="value">{valueText(o.value)}</code>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {!state.opentofu_encrypted && (
        <>
          <p>
            Read them from another configuration (a sensitive output is never sent; the token goes in the
            variable, any token with <code>tf_state:outputs</code> will do):
          </p>
          <Hcl text={remoteStateHcl(location.origin, name, props.user)} label="terraform_remote_state block" />
        </>
      )}
    </section>
  );
}
